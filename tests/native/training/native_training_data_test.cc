// training_data.h: a case's data (load, pack, split, steps from the length)
// and a group's epoch stream with its seeded reshuffle.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <string>

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
  r.path = text.path.string();
  r.format = "text";
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
  auto docs = data_load(r.path, r.format, tok);
  REQUIRE(docs.ok());
  DataSplit by_hand = data_split(data_pack(*docs, 4, tok.eos_id()), kEvalFraction, 3);
  REQUIRE(by_hand.train.size() == data->split.train.size());
  for (size_t i = 0; i < by_hand.train.size(); ++i) CHECK(by_hand.train[i].tokens == data->split.train[i].tokens);
}

TEST_CASE("training data: count_every_token unmasks an instruction's prompt; an empty dataset is an error") {
  TempFile dolly("training_data_dolly", R"({"instruction":"Say hi.","context":"","response":"hi"})" "\n");
  ByteTokenizer tok;
  TrainingDataRequest r;
  r.path = dolly.path.string();
  r.format = "dolly";
  r.seq_len = 8;
  r.steps = 1;
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
  r.path = empty.path.string();
  r.format = "jsonl";
  auto none = LoadTrainingData(r, tok);
  REQUIRE_FALSE(none.ok());
  CHECK(none.status().message() == r.path + ": the dataset has no tokens");
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
