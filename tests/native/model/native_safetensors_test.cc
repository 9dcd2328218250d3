// safetensors files and HF model directories: round trips, sharding, and the
// messages for broken files.
#include "native_test_support.h"

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "backends/native/model/generate.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/model/tokenizer.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

struct ScratchDir {
  fs::path path;
  explicit ScratchDir(const std::string& tag) {
    path = fs::temp_directory_path() / ("protocol_st_" + tag + "_" + std::to_string(getpid()));
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

ModelConfig SmallConfig() {
  ModelConfig c;
  c.name = "st";
  c.dim = 16;
  c.n_layers = 2;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.hidden_dim = 32;
  c.vocab_size = 128;
  c.max_seq_len = 64;
  return c;
}

Model SeededModel(at::ScalarType dtype = at::kFloat, uint64_t seed = 11) {
  Model m = model_create(SmallConfig(), at::TensorOptions().dtype(dtype));
  model_init_random(m, seed);
  return m;
}

bool SameWeights(Model& a, Model& b) {
  auto pa = model_parameters(a), pb = model_parameters(b);
  for (size_t i = 0; i < pa.size(); ++i)
    if (!at::equal(*pa[i].tensor, *pb[i].tensor)) return false;
  return true;
}

void TruncateBy(const std::string& file, uintmax_t bytes) { fs::resize_file(file, fs::file_size(file) - bytes); }

}  // namespace

TEST_CASE("native safetensors: save then load is bit-exact, single file and sharded") {
  ScratchDir dir("roundtrip");
  Model original = SeededModel();
  REQUIRE(model_save(original, dir / "one").ok());
  CHECK(fs::exists(dir / "one/model.safetensors"));
  auto loaded = model_load_dir(dir / "one", at::TensorOptions().dtype(at::kFloat));
  REQUIRE(loaded.ok());
  CHECK(SameWeights(original, *loaded));

  // Shards of at most 4 KiB: several files plus an index naming each tensor's file.
  REQUIRE(model_save(original, dir / "sharded", 4096).ok());
  CHECK(fs::exists(dir / "sharded/model.safetensors.index.json"));
  CHECK_FALSE(fs::exists(dir / "sharded/model.safetensors"));
  CHECK(fs::exists(dir / "sharded/model-00001-of-00008.safetensors"));
  auto sharded = model_load_dir(dir / "sharded", at::TensorOptions().dtype(at::kFloat));
  REQUIRE(sharded.ok());
  CHECK(SameWeights(original, *sharded));

  // bf16 on disk, loaded into a float32 model: exactly the bf16 values.
  Model half = SeededModel(at::kBFloat16);
  REQUIRE(model_save(half, dir / "bf16").ok());
  auto file = SafetensorsFile::Open(dir / "bf16/model.safetensors");
  REQUIRE(file.ok());
  CHECK((*file)->entries().at("lm_head.weight").dtype == "BF16");
  auto widened = model_load_dir(dir / "bf16", at::TensorOptions().dtype(at::kFloat));
  REQUIRE(widened.ok());
  CHECK(at::equal(widened->lm_head, half.lm_head.to(at::kFloat)));
  Model f16 = SeededModel(at::kHalf);
  REQUIRE(model_save(f16, dir / "f16").ok());
  auto f16_back = model_load_dir(dir / "f16", at::TensorOptions().dtype(at::kHalf));
  REQUIRE(f16_back.ok());
  CHECK(SameWeights(f16, *f16_back));
}

TEST_CASE("native safetensors: broken files are errors naming the file and the tensor") {
  ScratchDir dir("broken");
  Model m = SeededModel();
  const std::string w = dir / "m/model.safetensors";
  REQUIRE(model_save(m, dir / "m").ok());

  // Truncated data: the last tensor (lm_head, 128·16 floats) runs past the end.
  TruncateBy(w, 4);
  auto truncated = SafetensorsFile::Open(w);
  REQUIRE_FALSE(truncated.ok());
  const uint64_t data_bytes = static_cast<uint64_t>(m.config.ParameterCount()) * 4;
  CHECK(truncated.status().message() ==
        fmt::format("{}: tensor 'lm_head.weight': truncated: its data ends at byte {} but the file holds {} data bytes",
                    w, data_bytes, data_bytes - 4));
  CHECK(model_load_dir(dir / "m", at::TensorOptions()).status().message() == truncated.status().message());

  // Cut inside the header.
  fs::resize_file(w, 20);
  CHECK(StartsWith(SafetensorsFile::Open(w).status().message(), w + ": truncated: the header claims "));
  fs::resize_file(w, 4);
  CHECK(SafetensorsFile::Open(w).status().message() == w + ": truncated: 4 bytes, shorter than the 8-byte header length");

  // A header that is not JSON.
  const std::string junk = dir / "junk.safetensors";
  {
    std::ofstream out(junk, std::ios::binary);
    const char len[8] = {5, 0, 0, 0, 0, 0, 0, 0};
    out.write(len, 8);
    out << "{oops";
  }
  CHECK(StartsWith(SafetensorsFile::Open(junk).status().message(), junk + ": bad header: "));

  // A file without one of the tensors the config needs; a shape that differs.
  auto params = model_parameters(m);
  std::vector<std::pair<std::string, at::Tensor>> some;
  for (const auto& p : params)
    if (p.name != "model.norm.weight") some.push_back({p.name, *p.tensor});
  fs::create_directories(dir / "missing");
  REQUIRE(safetensors_save(dir / "missing/model.safetensors", some).ok());
  Model target = model_create(SmallConfig(), at::TensorOptions());
  CHECK(model_load_weights(target, dir / "missing").message() ==
        dir / "missing/model.safetensors" + ": tensor 'model.norm.weight' is missing");
  some.push_back({"model.norm.weight", at::zeros({3})});
  REQUIRE(safetensors_save(dir / "missing/model.safetensors", some).ok());
  CHECK(model_load_weights(target, dir / "missing").message() ==
        dir / "missing/model.safetensors" + ": tensor 'model.norm.weight' has shape [3], the config expects [16]");
  CHECK(model_load_weights(target, dir / "nothing").message() ==
        dir / "nothing" + ": no weights here (neither model.safetensors nor model.safetensors.index.json)");

  // An index naming a shard that is not there.
  REQUIRE(model_save(m, dir / "shards", 4096).ok());
  fs::remove(dir / "shards/model-00002-of-00008.safetensors");
  CHECK(StartsWith(model_load_weights(target, dir / "shards").message(),
                   dir / "shards/model-00002-of-00008.safetensors" + ": cannot open: "));
}

TEST_CASE("native safetensors: an HF-layout directory loads and generates deterministically") {
  ScratchDir dir("hf");
  // tokenizer.model trained on a corpus written here.
  {
    std::ofstream corpus(dir / "corpus.txt");
    for (int i = 0; i < 30; ++i) corpus << "Can there be life somewhere in the Solar System outside Earth?\n";
  }
  const std::string cmd = "spm_train --input=" + (dir / "corpus.txt") + " --model_prefix=" + (dir / "model/tokenizer") +
                          " --vocab_size=60 --hard_vocab_limit=false --model_type=bpe --minloglevel=2 >/dev/null 2>&1";
  fs::create_directories(dir / "model");
  REQUIRE(std::system(cmd.c_str()) == 0);
  Model original = SeededModel();
  REQUIRE(model_save(original, dir / "model").ok());
  CHECK(fs::exists(dir / "model/config.json"));

  auto tok = LoadSentencePieceTokenizer(dir / "model/tokenizer.model");
  REQUIRE(tok.ok());
  std::vector<int> prompt = (*tok)->Encode("Can there be life?");
  prompt.insert(prompt.begin(), (*tok)->bos_id());
  GenerateOptions o;
  o.max_new_tokens = 12;
  auto expected = generate_greedy(original, prompt, o);
  REQUIRE(expected.ok());
  for (int run = 0; run < 2; ++run) {
    auto loaded = model_load_dir(dir / "model", at::TensorOptions().dtype(at::kFloat));
    REQUIRE(loaded.ok());
    CHECK(loaded->config.n_kv_heads == 1);
    auto g = generate_greedy(*loaded, prompt, o);
    REQUIRE(g.ok());
    CHECK(g->tokens == expected->tokens);
  }
}

}  // namespace native
}  // namespace protocol
