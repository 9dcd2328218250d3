// Native training: data reading/packing/masking, tokenizer, LR schedule, AdamW loop.
#include "native_test_support.h"

#include <ATen/Parallel.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/native/training/data.h"
#include "backends/native/model/tokenizer.h"
#include "backends/native/training/train.h"
#include "runner/base/text.h"

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
  std::string Decode(const std::vector<int>& ids) const override {
    std::string s;
    for (int id : ids)
      if (id >= 3) s.push_back(static_cast<char>(id - 3));
    return s;
  }
  int bos_id() const override { return 1; }
  int eos_id() const override { return 2; }
  int vocab_size() const override { return 259; }
};

// A fresh directory under the system temp dir, removed at scope end.
struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("protocol_" + tag + "_" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string Write(const std::string& name, const std::string& text) const {
    std::ofstream(path / name, std::ios::binary) << text;
    return (path / name).string();
  }
};

}  // namespace

TEST_CASE("native data: dolly masking counts only response tokens") {
  ByteTokenizer tok;
  DollyRecord r{"Name a colour.", "", "Blue", "open_qa"};
  CHECK(dolly_prompt(r) == "### Instruction:\nName a colour.\n\n### Response:\n");
  DollyRecord with_context{"Summarise.", "Cats sleep.", "Sleepy cats", "summarization"};
  CHECK(dolly_prompt(with_context) == "### Instruction:\nSummarise.\n\n### Context:\nCats sleep.\n\n### Response:\n");

  auto docs = data_tokenize_dolly({r}, tok);
  REQUIRE(docs.size() == 1);
  const size_t prompt_len = 1 + dolly_prompt(r).size();  // BOS + prompt bytes
  REQUIRE(docs[0].tokens.size() == prompt_len + 4 + 1);  // + "Blue" + EOS
  for (size_t i = 0; i < prompt_len; ++i) CHECK(docs[0].loss_mask[i] == 0);
  for (size_t i = prompt_len; i < docs[0].tokens.size(); ++i) CHECK(docs[0].loss_mask[i] == 1);
  CHECK(tok.Decode(std::vector<int>(docs[0].tokens.begin() + static_cast<long>(prompt_len), docs[0].tokens.end())) == "Blue");

  // After packing, a target counts exactly when its token is a response token.
  auto seqs = data_pack(docs, 16, 0);
  int64_t counted = 0;
  for (const auto& s : seqs)
    for (auto m : s.mask) counted += m;
  CHECK(counted == 5);
}

TEST_CASE("native data: packing cuts seq_len+1 windows with stride seq_len and pads the tail") {
  Document d;
  for (int i = 10; i < 20; ++i) {
    d.tokens.push_back(i);
    d.loss_mask.push_back(1);
  }
  auto seqs = data_pack({d}, 4, 0);
  REQUIRE(seqs.size() == 3);
  CHECK(seqs[0].tokens == std::vector<int>{10, 11, 12, 13, 14});
  CHECK(seqs[1].tokens == std::vector<int>{14, 15, 16, 17, 18});
  CHECK(seqs[2].tokens == std::vector<int>{18, 19, 0, 0, 0});
  CHECK(seqs[2].mask == std::vector<uint8_t>{1, 0, 0, 0});

  std::vector<Sequence> many;
  for (int i = 0; i < 10; ++i) many.push_back(Sequence{{i}, {1}});
  DataSplit a = data_split(many, 0.2, 5), b = data_split(many, 0.2, 5), c = data_split(many, 0.2, 6);
  CHECK(a.train.size() == 8);
  CHECK(a.eval.size() == 2);
  auto firsts = [](const std::vector<Sequence>& v) {
    std::vector<int> out;
    for (const auto& s : v) out.push_back(s.tokens[0]);
    return out;
  };
  CHECK(firsts(a.train) == firsts(b.train));
  CHECK(firsts(a.train) != firsts(c.train));
  CHECK(data_split({Sequence{{1}, {1}}}, 0.5, 1).eval.empty());  // never hold out the only sequence
}

TEST_CASE("native data: readers name the file and line of a bad record") {
  TempDir dir("data");
  std::string jsonl = dir.Write("a.jsonl", "{\"text\": \"one\"}\n\n{\"txt\": \"two\"}\n");
  CHECK(data_read_texts(jsonl, "jsonl").status().message() == jsonl + ":3: no \"text\" string field");
  std::string broken = dir.Write("b.jsonl", "{\"text\": \n");
  CHECK(StartsWith(data_read_texts(broken, "jsonl").status().message(), broken + ":1: not valid JSON: "));
  std::string dolly = dir.Write("d.jsonl", "{\"instruction\": \"i\", \"context\": \"\"}\n");
  CHECK(data_read_dolly(dolly).status().message() == dolly + ":1: dolly record has no \"response\" string field");
  CHECK(data_read_texts("/nonexistent/x.txt", "text").status().message() ==
        "/nonexistent/x.txt: no such dataset file or directory");
  ByteTokenizer tok;
  CHECK(data_load({jsonl, "tokens", ""}, tok).status().message() ==
        jsonl + ": dataset format 'tokens' is not supported by the native backend (use text, jsonl, parquet or dolly)");

  // A directory of text files: each file a document, in name order.
  TempDir texts("texts");
  texts.Write("2.txt", "second");
  texts.Write("1.txt", "first");
  texts.Write("skip.md", "not read");
  auto read = data_read_texts(texts.path.string(), "text");
  REQUIRE(read.ok());
  CHECK(*read == std::vector<std::string>{"first", "second"});
}

TEST_CASE("native train: learning rate warms up linearly then decays by cosine") {
  TrainOptions o;
  o.learning_rate = 1.0;
  o.min_lr_ratio = 0.1;
  o.warmup_steps = 4;
  CHECK(lr_at_step(0, 14, o) == doctest::Approx(0.25));
  CHECK(lr_at_step(3, 14, o) == doctest::Approx(1.0));
  CHECK(lr_at_step(4, 14, o) == doctest::Approx(1.0));
  CHECK(lr_at_step(13, 14, o) == doctest::Approx(0.1));
  // Halfway through the decay: lr_min + (lr − lr_min)/2.
  o.warmup_steps = 0;
  CHECK(lr_at_step(5, 11, o) == doctest::Approx(0.55));
}

TEST_CASE("native train: loss on a tiny repeated corpus clearly drops") {
  at::set_num_threads(2);
  ByteTokenizer tok;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "the cat sat on the mat. ";
  auto seqs = data_pack(data_tokenize_texts({text}, tok), 32, 0);
  DataSplit split = data_split(seqs, 0.1, 1);

  ModelConfig c = testing::TinyTestConfig(259);
  Model m = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 3);
  TrainOptions o;
  o.batch_size = 4;
  o.grad_accum = 2;
  o.learning_rate = 1e-2;
  o.warmup_steps = 2;
  AdamW opt(model_trainable(m), o);
  const double eval_before = *eval_loss(m, split.eval, 4);
  CHECK(eval_before > 4.5);  // about ln(259) = 5.56 for random weights
  const int steps = 30;
  double first = 0, last = 0;
  for (int step = 0; step < steps; ++step) {
    std::vector<const Sequence*> batch;
    for (int i = 0; i < 4; ++i) batch.push_back(&split.train[static_cast<size_t>(step * 4 + i) % split.train.size()]);
    StepStats s = train_step(m, opt, batch, o, lr_at_step(step, steps, o));
    CHECK(s.tokens == 4 * 32);
    if (step == 0) first = s.loss;
    last = s.loss;
  }
  CHECK(opt.steps_taken() == steps);
  CHECK(last < 0.4 * first);
  CHECK(*eval_loss(m, split.eval, 4) < 0.4 * eval_before);
}

// Trains a SentencePiece model with spm_train and returns the output of
// spm_encode --output_format=id for `line` (the reference implementation).
std::vector<int> SpmReference(const TempDir& dir, const std::string& model, const std::string& line) {
  const std::string in = dir.Write("line.txt", line + "\n");
  const std::string out = (dir.path / "ids.txt").string();
  const std::string cmd = "spm_encode --model=" + model + " --output_format=id < " + in + " > " + out;
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream f(out);
  std::vector<int> ids;
  int id;
  while (f >> id) ids.push_back(id);
  return ids;
}

std::string TrainSpm(const TempDir& dir, const std::string& name, const std::string& extra) {
  std::string corpus;
  for (int i = 0; i < 30; ++i)
    corpus += "Can there be life somewhere in the Solar System outside Earth? Maybe on Europa or Enceladus.\n"
              "The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.\n";
  const std::string input = dir.Write("corpus.txt", corpus);
  const std::string prefix = (dir.path / name).string();
  const std::string cmd = "spm_train --input=" + input + " --model_prefix=" + prefix +
                          " --vocab_size=" + std::to_string(extra.find("byte_fallback") != std::string::npos ? 340 : 80) + " --hard_vocab_limit=false --character_coverage=1.0 --minloglevel=2 " +
                          extra + " >/dev/null 2>&1";
  REQUIRE(std::system(cmd.c_str()) == 0);
  return prefix + ".model";
}

TEST_CASE("native tokenizer: ids equal spm_encode's for BPE and unigram models") {
  TempDir dir("spm");
  const std::vector<std::string> lines = {
      "Can there be life somewhere in the Solar System outside Earth?",
      "  life   on Europa, maybe!  ",
      "Zebras x-ray quartz",  // 'Z' and '-' are rare; 'é' below is unseen
      "caf\xc3\xa9 over the dog",
      "The  quick\tbrown   fox jumps over the lazy dog; Europa  Enceladus Earth"};
  for (const std::string& extra : {std::string("--model_type=bpe --normalization_rule_name=identity --byte_fallback=true"),
                                   std::string("--model_type=bpe"), std::string("--model_type=unigram")}) {
    CAPTURE(extra);
    const std::string model = TrainSpm(dir, "tok", extra);
    auto tok = LoadSentencePieceTokenizer(model);
    REQUIRE(tok.ok());
    CHECK((*tok)->bos_id() == 1);
    CHECK((*tok)->eos_id() == 2);
    for (const std::string& line : lines) {
      CAPTURE(line);
      const std::vector<int> ids = (*tok)->Encode(line);
      CHECK(ids == SpmReference(dir, model, line));
    }
    CHECK((*tok)->Decode((*tok)->Encode("life on Europa")) == "life on Europa");
  }
}

// spm_decode --input_format=id of each sequence (one line each).
std::vector<std::string> SpmDecode(const TempDir& dir, const std::string& model,
                                   const std::vector<std::vector<int>>& sequences) {
  std::string lines;
  for (const auto& ids : sequences) {
    std::vector<std::string> words;
    for (int id : ids) words.push_back(std::to_string(id));
    lines += Join(words, " ") + "\n";
  }
  const std::string in = dir.Write("ids.txt", lines);
  const std::string out = (dir.path / "text.txt").string();
  const std::string cmd = "spm_decode --model=" + model + " --input_format=id < " + in + " > " + out;
  REQUIRE(std::system(cmd.c_str()) == 0);
  std::ifstream f(out, std::ios::binary);
  std::vector<std::string> texts;
  std::string line;
  while (std::getline(f, line)) texts.push_back(line);
  return texts;
}

TEST_CASE("native tokenizer: Decode equals spm_decode's, byte pieces included, and is valid UTF-8") {
  TempDir dir("spm_decode");
  // spm_train's default normaliser removes extra whitespace, where
  // SentencePiece 0.1.97 (installed) and later versions decode alike.
  const std::string model =
      TrainSpm(dir, "bytes", "--model_type=bpe --normalization_rule_name=identity --byte_fallback=true");
  auto tok = LoadSentencePieceTokenizer(model);
  REQUIRE(tok.ok());
  const int vocab = (*tok)->vocab_size();
  // With byte fallback, ids 3..258 are the pieces <0x00>..<0xFF>.
  auto b = [](int byte) { return 3 + byte; };
  const int life = (*tok)->Encode("life").front();
  std::vector<std::vector<int>> sequences = {
      {b(0xC3), b(0xA9)},                          // é, well-formed
      {life, b(0xE2), b(0x82), b(0x41), life},     // truncated € then 'A'
      {b(0xE2), b(0x82), b(0xAC)},                 // €
      {b(0xC0), b(0x80)},                          // overlong
      {b(0xED), b(0xA0), b(0x80)},                 // surrogate
      {b(0x80), life, b(0xBF)},                    // lone continuation bytes
      {b(0xF0), b(0x9F), b(0x98), b(0x80)},        // 😀
      {b(0xF0), b(0x9F), 1, b(0x98), b(0x80)},     // a control piece splits the run
      {0, b(0xFF), life},                          // unknown piece, byte never in UTF-8
      {life, life, b(0x20), life},
  };
  uint64_t state = 7;
  for (int n = 0; n < 300; ++n) {
    std::vector<int> ids;
    for (int k = 0, len = 1 + n % 12; k < len; ++k) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      int id = static_cast<int>((state >> 33) % static_cast<uint64_t>(vocab));
      if (n % 2 == 0) id = b(0x80 + static_cast<int>((state >> 20) % 0x80));  // runs of high bytes
      if (id == b('\n') || id == b('\r')) id = life;  // one output line per sequence
      ids.push_back(id);
    }
    sequences.push_back(ids);
  }
  const std::vector<std::string> reference = SpmDecode(dir, model, sequences);
  REQUIRE(reference.size() == sequences.size());
  int replaced = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    CAPTURE(i);
    const std::string text = (*tok)->Decode(sequences[i]);
    CHECK(text == reference[i]);
    CHECK(IsValidUtf8(text));
    replaced += text.find("\xEF\xBF\xBD") != std::string::npos;
  }
  CHECK(replaced > 100);  // the invalid byte runs were exercised
  CHECK((*tok)->Decode(sequences[0]) == "\xC3\xA9");
  CHECK((*tok)->Decode(sequences[3]) == "\xEF\xBF\xBD\xEF\xBF\xBD");
  CHECK((*tok)->Decode(sequences[4]) == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("native tokenizer: a missing or unreadable model is named") {
  TempDir dir("spm_bad");
  CHECK(LoadSentencePieceTokenizer("/nonexistent/tokenizer.model").status().message() ==
        "/nonexistent/tokenizer.model: no tokenizer model here (a SentencePiece tokenizer.model is needed to turn "
        "text into tokens; put one in the model's directory)");
  const std::string junk = dir.Write("junk.model", "not a model");
  CHECK(LoadSentencePieceTokenizer(junk).status().message() == junk + ": not a SentencePiece model: malformed protobuf");
}

}  // namespace native
}  // namespace protocol
