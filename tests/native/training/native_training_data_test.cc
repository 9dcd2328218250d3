// training_data.h: a case's data (load, pack, split, steps from the length)
// and a group's epoch stream with its seeded reshuffle.
#include <doctest/doctest.h>

#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>

#include <fmt/format.h>

#include "backends/native/training/training_data.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

// Bytes as tokens: id = byte + 3; 0 unk, 1 bos, 2 eos.
class ByteTokenizer : public Tokenizer {
 public:
  std::vector<int> Encode(const std::string& text) const override {
    std::vector<int> ids;
    for (unsigned char ch : text) ids.push_back(ch + 3);
    return ids;
  }
  std::string Decode(const std::vector<int>&) const override { return ""; }
  int bos_id() const override { return 1; }
  int eos_id() const override { return 2; }
  int vocab_size() const override { return 259; }
};

struct TempFile {
  fs::path path;
  TempFile(const std::string& name, const std::string& text)
      : path(fs::temp_directory_path() / (name + "_" + std::to_string(getpid()))) {
    std::ofstream(path, std::ios::binary) << text;
  }
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

std::vector<Sequence> Numbered(int n) {
  std::vector<Sequence> seqs(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) seqs[static_cast<size_t>(i)].tokens = {i};
  return seqs;
}

}  // namespace

TEST_CASE("training data: packed, split with kEvalFraction, steps from steps or epochs") {
  // 1 + 399 + 1 = 401 tokens, seq_len 4: 100 windows of 5 tokens with stride 4.
  TempFile text("training_data_text", std::string(399, 'a'));
  ByteTokenizer tok;
  TrainingDataRequest r;
  r.dataset = {text.path.string(), "text", ""};
  r.seq_len = 4;
  r.batch_size = 8;
  r.seed = 3;
  r.epochs = 2;
  auto data = LoadTrainingData(r, tok);
  REQUIRE(data.ok());
  CHECK(data->split.eval.size() == 5);   // round(0.05 · 100)
  CHECK(data->split.train.size() == 95);
  CHECK(data->steps_per_epoch == 12);    // ceil(95 / 8)
  CHECK(data->steps == 24);              // 2 epochs
  r.steps = 7;
  CHECK(LoadTrainingData(r, tok)->steps == 7);

  // The same split as data.h's functions composed by hand.
  auto docs = data_load(r.dataset, tok);
  REQUIRE(docs.ok());
  DataSplit by_hand = data_split(data_pack(docs->docs, 4, tok.eos_id()), kEvalFraction, 3);
  REQUIRE(by_hand.train.size() == data->split.train.size());
  for (size_t i = 0; i < by_hand.train.size(); ++i) CHECK(by_hand.train[i].tokens == data->split.train[i].tokens);
}

TEST_CASE("training data: count_every_token unmasks an instruction's prompt; an empty dataset is an error") {
  TempFile dolly("training_data_dolly", R"({"instruction":"Say hi.","context":"","response":"hi"})" "\n");
  ByteTokenizer tok;
  TrainingDataRequest r;
  r.dataset = {dolly.path.string(), "dolly", ""};
  r.seq_len = 8;
  r.epochs = 1;  // the whole record: a budget in steps would cut it
  auto counted = [&](bool every) {
    r.count_every_token = every;
    auto data = LoadTrainingData(r, tok);
    REQUIRE(data.ok());
    int64_t n = 0;
    for (const auto* part : {&data->split.train, &data->split.eval})
      for (const Sequence& s : *part)
        for (uint8_t m : s.mask) n += m;
    return n;
  };
  CHECK(counted(false) == 3);  // "hi" + EOS
  CHECK(counted(true) > 3);

  TempFile empty("training_data_empty", "");
  r.dataset = {empty.path.string(), "jsonl", ""};
  auto none = LoadTrainingData(r, tok);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() == r.dataset.path + ": the dataset has no tokens");
}

TEST_CASE("epoch stream: a group's every groups-th sequence, reshuffled with seed + epoch") {
  const std::vector<Sequence> train = Numbered(7);
  EpochStream group1(train, 2, 1, 5);  // sequences 1, 3, 5
  REQUIRE(group1.size() == 3);
  std::vector<int> first;
  for (const Sequence* s : group1.Next(3)) first.push_back(s->tokens[0]);
  CHECK(first == std::vector<int>{1, 3, 5});
  // Epoch 1: the group's order shuffled with seed 5 + 1.
  std::vector<Sequence> expected = {train[1], train[3], train[5]};
  data_shuffle(expected, 6);
  std::vector<const Sequence*> second = group1.Next(3);
  for (size_t i = 0; i < 3; ++i) CHECK(second[i]->tokens == expected[i].tokens);

  EpochStream one(train, 1, 0, 5);  // one process: every sequence
  std::set<int> seen;
  for (const Sequence* s : one.Next(7)) seen.insert(s->tokens[0]);
  CHECK(seen.size() == 7);
  CHECK(EpochStream({}, 1, 0, 5).empty());
}

}  // namespace native
}  // namespace protocol

namespace protocol {
namespace native {

TEST_CASE("training data: a length in steps reads only the start of the dataset it needs") {
  CHECK(SequencesForSteps(0, 8) == 0);
  CHECK(SequencesForSteps(7, 8) == 59);  // 59 - round(0.05 · 59) = 56 = 7 × 8
  CHECK(SequencesForSteps(1, 1) == 2);   // one held out from 2
  for (int64_t steps : {1, 3, 10, 1000})
    for (int64_t batch : {1, 2, 16}) {
      const int64_t n = SequencesForSteps(steps, batch);
      CHECK(n - data_held_out(n, kEvalFraction) == steps * batch);
    }

  // 100 one-line documents of 9 bytes + BOS + EOS = 11 tokens each.
  std::string lines;
  for (int i = 0; i < 100; ++i) lines += fmt::format("{{\"text\": \"doc {:05}\"}}\n", i);
  TempFile jsonl("training_data_budget.jsonl", lines);
  ByteTokenizer tok;
  TrainingDataRequest r;
  r.dataset = {jsonl.path.string(), "jsonl", ""};
  r.seq_len = 4;
  r.batch_size = 2;
  r.steps = 3;
  auto data = LoadTrainingData(r, tok);
  REQUIRE(data.ok());
  // 7 sequences (6 train + 1 held out) need 7·4 + 1 = 29 tokens: 3 documents.
  CHECK(data->split.train.size() == 6);
  CHECK(data->split.eval.size() == 1);
  CHECK_FALSE(data->whole_dataset);
  CHECK(data->documents_read == 3);
  CHECK(data->tokens_read == 33);
  CHECK(data->ReadNote() == "the first 3 documents of the dataset (33 tokens), what 3 steps need");
  // The sequences are the first 29 tokens of the corpus, shuffled.
  std::vector<int> starts;
  for (const auto* part : {&data->split.train, &data->split.eval})
    for (const Sequence& s : *part) starts.push_back(s.tokens[0]);
  std::sort(starts.begin(), starts.end());
  std::vector<int> expected;
  auto docs = data_load(r.dataset, tok);
  REQUIRE(docs.ok());
  std::vector<Sequence> all = data_pack(docs->docs, 4, tok.eos_id());
  for (int i = 0; i < 7; ++i) expected.push_back(all[static_cast<size_t>(i)].tokens[0]);
  std::sort(expected.begin(), expected.end());
  CHECK(starts == expected);

  // More steps than the corpus holds: read whole, then epochs.
  r.steps = 1000;
  data = LoadTrainingData(r, tok);
  REQUIRE(data.ok());
  CHECK(data->whole_dataset);
  CHECK(data->documents_read == 100);
  CHECK(data->ReadNote() == "the whole dataset (100 documents, 1100 tokens)");
}

TEST_CASE("training data: parquet copies of a jsonl corpus give the same sequences, from every writer and codec") {
  const std::string dir = std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/parquet/";
  ByteTokenizer tok;
  TrainingDataRequest r;
  r.seq_len = 32;
  r.batch_size = 4;
  r.seed = 11;
  auto load = [&](const std::string& path, const std::string& format, int64_t steps) {
    r.dataset = {path, format, ""};
    r.steps = steps;
    r.epochs = steps > 0 ? 0 : 1;
    auto data = LoadTrainingData(r, tok);
    REQUIRE_MESSAGE(data.ok(), data.status().message());
    return std::move(*data);
  };
  for (int64_t steps : {0, 5}) {  // the whole corpus (1 epoch), and the start 5 steps need
    CAPTURE(steps);
    const TrainingData jsonl = load(dir + "corpus.jsonl", "jsonl", steps);
    for (const char* copy : {"plain-uncompressed-v1.parquet", "dict-snappy-v1.parquet", "dict-zstd-v2.parquet",
                             "plain-gzip-v2.parquet", "nulls-snappy-v1.parquet", "delta-byte-array-zstd-v2.parquet",
                             "delta-length-snappy-v1.parquet", "nulls-gzip-v2.parquet", "hyparquet-snappy.parquet",
                             "hyparquet-nulls-uncompressed.parquet", "folder"}) {
      CAPTURE(std::string(copy));
      const TrainingData parquet = load(dir + copy, "parquet", steps);
      CHECK(parquet.documents_read == jsonl.documents_read);
      CHECK(parquet.tokens_read == jsonl.tokens_read);
      REQUIRE(parquet.split.train.size() == jsonl.split.train.size());
      REQUIRE(parquet.split.eval.size() == jsonl.split.eval.size());
      for (size_t i = 0; i < jsonl.split.train.size(); ++i) {
        CHECK(parquet.split.train[i].tokens == jsonl.split.train[i].tokens);
        CHECK(parquet.split.train[i].mask == jsonl.split.train[i].mask);
      }
      for (size_t i = 0; i < jsonl.split.eval.size(); ++i) CHECK(parquet.split.eval[i].tokens == jsonl.split.eval[i].tokens);
    }
  }
}

}  // namespace native
}  // namespace protocol
