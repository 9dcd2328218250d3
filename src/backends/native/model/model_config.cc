#include "backends/native/model/model_config.h"

#include <filesystem>

#include "runner/base/json.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

ModelConfig Make(const char* name, int64_t dim, int64_t layers, int64_t heads, int64_t kv,
                 int64_t hidden, int64_t vocab, int64_t seq, double eps) {
  ModelConfig c;
  c.name = name;
  c.dim = dim;
  c.n_layers = layers;
  c.n_heads = heads;
  c.n_kv_heads = kv;
  c.hidden_dim = hidden;
  c.vocab_size = vocab;
  c.max_seq_len = seq;
  c.norm_eps = eps;
  return c;
}

// The table of presets. Llama-2 numbers are those of the published HF
// config.json files (meta-llama/Llama-2-{7,13,70}b-hf).
const std::vector<ModelConfig>& Presets() {
  static const std::vector<ModelConfig> table = {
      Make("llama2-7b", 4096, 32, 32, 32, 11008, 32000, 4096, 1e-5),
      Make("llama2-13b", 5120, 40, 40, 40, 13824, 32000, 4096, 1e-5),
      Make("llama2-70b", 8192, 80, 64, 8, 28672, 32000, 4096, 1e-5),
      // ~2.0 M parameters: trains ~30 steps in well under a minute on 2 CPU cores.
      Make("tiny", 192, 4, 6, 2, 512, 1024, 512, 1e-5),
      // ~99.5 M parameters.
      Make("small-100m", 768, 8, 12, 4, 2048, 32000, 1024, 1e-5),
      // ~1.1 B parameters, the shape of TinyLlama-1.1B (Llama-2 architecture,
      // 4 key/value heads): the GPU benchmark's training-MFU model.
      Make("llama-1b", 2048, 22, 32, 4, 5632, 32000, 2048, 1e-5),
      // ~100.7 M parameters, 98% of them in the 14 decoder layers (a vocabulary
      // just above the quickstart tokenizer's 512): FSDP memory benchmarks,
      // where the per-unit sharding is what is measured (bench/fsdp_memory.sh).
      Make("layers-100m", 768, 14, 12, 12, 2048, 1024, 1024, 1e-5),
  };
  return table;
}

}  // namespace

int64_t ModelConfig::ParameterCount() const {
  const int64_t hd = HeadDim();
  const int64_t attention = dim * n_heads * hd          // q_proj
                            + 2 * dim * n_kv_heads * hd  // k_proj, v_proj
                            + n_heads * hd * dim;        // o_proj
  const int64_t mlp = 3 * dim * hidden_dim;              // gate, up, down
  const int64_t norms = 2 * dim;                         // input / post-attention RMSNorm
  return vocab_size * dim                                // embed_tokens
         + n_layers * (attention + mlp + norms)
         + dim                                           // final norm
         + vocab_size * dim;                             // lm_head (untied)
}

double ModelConfig::TrainingFlopsPerToken(int64_t seq_len) const {
  const double n = static_cast<double>(ParameterCount() - EmbeddingParameterCount());
  return 6.0 * n + 12.0 * static_cast<double>(n_layers) * static_cast<double>(n_heads) *
                       static_cast<double>(HeadDim()) * static_cast<double>(seq_len);
}

double ModelConfig::FrozenBaseTrainingFlopsPerToken(int64_t seq_len) const {
  return TrainingFlopsPerToken(seq_len) - 2.0 * static_cast<double>(ParameterCount() - EmbeddingParameterCount());
}

std::vector<std::string> ModelConfig::Validate() const {
  std::vector<std::string> problems;
  auto positive = [&](const char* field, int64_t v) {
    if (v <= 0) problems.push_back(fmt::format("model '{}': {} must be > 0 (got {})", name, field, v));
  };
  positive("hidden_size", dim);
  positive("num_hidden_layers", n_layers);
  positive("num_attention_heads", n_heads);
  positive("num_key_value_heads", n_kv_heads);
  positive("intermediate_size", hidden_dim);
  positive("vocab_size", vocab_size);
  positive("max_position_embeddings", max_seq_len);
  if (n_heads > 0 && dim % n_heads != 0)
    problems.push_back(fmt::format("model '{}': hidden_size {} is not a multiple of num_attention_heads {}",
                                   name, dim, n_heads));
  if (n_heads > 0 && n_kv_heads > 0 && n_heads % n_kv_heads != 0)
    problems.push_back(fmt::format("model '{}': num_attention_heads {} is not a multiple of num_key_value_heads {}",
                                   name, n_heads, n_kv_heads));
  if (n_heads > 0 && dim % n_heads == 0 && HeadDim() % 2 != 0)
    problems.push_back(fmt::format("model '{}': head dim {} must be even for rotary embeddings", name, HeadDim()));
  return problems;
}

std::string ModelConfig::ToHfJson() const {
  Json j;
  j["architectures"] = Json::array({"LlamaForCausalLM"});
  j["model_type"] = "llama";
  j["hidden_size"] = dim;
  j["intermediate_size"] = hidden_dim;
  j["num_hidden_layers"] = n_layers;
  j["num_attention_heads"] = n_heads;
  j["num_key_value_heads"] = n_kv_heads;
  j["vocab_size"] = vocab_size;
  j["max_position_embeddings"] = max_seq_len;
  j["rms_norm_eps"] = norm_eps;
  j["rope_theta"] = rope_theta;
  j["hidden_act"] = "silu";
  j["tie_word_embeddings"] = false;
  j["bos_token_id"] = bos_id;
  j["eos_token_id"] = eos_id;
  return j.dump(2) + "\n";
}

Result<ModelConfig> PresetConfig(const std::string& name) {
  for (const auto& c : Presets())
    if (c.name == name) return c;
  return Status::NotFound(fmt::format("unknown model preset '{}' (known: {})", name,
                                      Join(PresetNames(), ", ")));
}

std::vector<std::string> PresetNames() {
  std::vector<std::string> names;
  for (const auto& c : Presets()) names.push_back(c.name);
  return names;
}

Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& file) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const std::exception& e) {
    return Status::InvalidArgument(fmt::format("{}: not valid JSON: {}", file, e.what()));
  }
  if (!j.is_object()) return Status::InvalidArgument(fmt::format("{}: expected a JSON object", file));
  if (j.contains("model_type") && j["model_type"] != "llama")
    return Status::InvalidArgument(fmt::format("{}: model_type '{}' is not supported (only 'llama')", file,
                                               j["model_type"].is_string() ? j["model_type"].get<std::string>() : j["model_type"].dump()));
  if (j.value("tie_word_embeddings", false))
    return Status::InvalidArgument(fmt::format("{}: tie_word_embeddings=true is not supported (Llama-2 has an untied lm_head)", file));
  ModelConfig c;
  c.name = std::filesystem::path(file).parent_path().filename().string();
  std::vector<std::string> missing;
  auto need = [&](const char* key, int64_t& out) {
    if (!j.contains(key) || !j[key].is_number_integer()) {
      missing.push_back(key);
      return;
    }
    out = j[key].get<int64_t>();
  };
  need("hidden_size", c.dim);
  need("num_hidden_layers", c.n_layers);
  need("num_attention_heads", c.n_heads);
  need("intermediate_size", c.hidden_dim);
  need("vocab_size", c.vocab_size);
  if (!missing.empty())
    return Status::InvalidArgument(fmt::format("{}: missing or non-integer key(s): {}", file, Join(missing, ", ")));
  c.n_kv_heads = j.contains("num_key_value_heads") && j["num_key_value_heads"].is_number_integer()
                     ? j["num_key_value_heads"].get<int64_t>() : c.n_heads;
  c.max_seq_len = j.contains("max_position_embeddings") && j["max_position_embeddings"].is_number_integer()
                      ? j["max_position_embeddings"].get<int64_t>() : 4096;
  if (j.contains("rms_norm_eps") && j["rms_norm_eps"].is_number()) c.norm_eps = j["rms_norm_eps"].get<double>();
  if (j.contains("rope_theta") && j["rope_theta"].is_number()) c.rope_theta = j["rope_theta"].get<double>();
  if (j.contains("bos_token_id") && j["bos_token_id"].is_number_integer()) c.bos_id = j["bos_token_id"].get<int>();
  if (j.contains("eos_token_id") && j["eos_token_id"].is_number_integer()) c.eos_id = j["eos_token_id"].get<int>();
  auto problems = c.Validate();
  if (!problems.empty()) return Status::InvalidArgument(fmt::format("{}: {}", file, Join(problems, "; ")));
  return c;
}

Result<ModelConfig> ReadHfConfig(const std::string& dir) {
  const std::string file = (std::filesystem::path(dir) / "config.json").string();
  auto text = ReadFileText(file);
  if (!text.ok()) return Status::NotFound(fmt::format("{}: no such file", file));
  return ParseHfConfig(text.value(), file);
}

}  // namespace native
}  // namespace protocol
