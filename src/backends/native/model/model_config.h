#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_CONFIG_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_CONFIG_H_

// The Llama-2 architecture's numbers: built-in presets at the published
// dimensions, and reading/writing a Hugging Face config.json. No libtorch here,
// so the plan checker and the reports can use it cheaply.
//
// Dimension legend used across src/backends/native:
//   B  batch (sequences)          T  sequence length (tokens)
//   C  model width (dim)          V  vocabulary size
//   NH query heads                NKV key/value heads (grouped-query attention)
//   HD head dim = C / NH          F  MLP hidden width (intermediate_size)
//   L  decoder layers

#include <cstdint>
#include <string>
#include <vector>

#include "runner/base/status.h"

namespace protocol {
namespace native {

struct ModelConfig {
  std::string name;            // preset name or the directory it was read from
  int64_t dim = 0;             // C   (HF hidden_size)
  int64_t n_layers = 0;        // L   (HF num_hidden_layers)
  int64_t n_heads = 0;         // NH  (HF num_attention_heads)
  int64_t n_kv_heads = 0;      // NKV (HF num_key_value_heads); == NH without GQA
  int64_t hidden_dim = 0;      // F   (HF intermediate_size)
  int64_t vocab_size = 0;      // V
  int64_t max_seq_len = 0;     // HF max_position_embeddings: the rotary table's length
  double norm_eps = 1e-5;      // HF rms_norm_eps
  double rope_theta = 10000;   // HF rope_theta
  int bos_id = 1;              // HF bos_token_id
  int eos_id = 2;              // HF eos_token_id

  int64_t HeadDim() const { return dim / n_heads; }  // HD
  // N: every parameter (embedding, layers, final norm, untied lm_head).
  int64_t ParameterCount() const;
  // N_embedding: the token embedding table only (V·C), as torchtitan counts it.
  int64_t EmbeddingParameterCount() const { return vocab_size * dim; }
  // Training FLOPs per token (forward + backward), per the PaLM paper (appendix B)
  // as torchtitan computes it: 6·(N − N_embedding) + 12·L·H·Q·T, where
  // 6 = 2 (multiply-add) × 3 (forward + two backward matmuls) per weight, and
  // 12·L·H·Q·T is the attention score/value matmuls (H heads, Q head dim,
  // T sequence length), which have no weights.
  double TrainingFlopsPerToken(int64_t seq_len) const;
  // The same with the base frozen (QLoRA): no weight gradients for the base,
  // 4·(N − N_embedding) + 12·L·H·Q·T. The LoRA adapters' own FLOPs (6 per
  // adapter parameter, about 0.5% of this for Llama-2-7B at rank 8) are not counted.
  double FrozenBaseTrainingFlopsPerToken(int64_t seq_len) const;
  // Every problem with the numbers, one message each (empty when usable).
  std::vector<std::string> Validate() const;
  // HF LlamaForCausalLM config.json text (what Load reads back).
  std::string ToHfJson() const;
};

// Built-in presets: "llama2-7b", "llama2-13b", "llama2-70b" (published dims;
// 70b uses 8 key/value heads), "tiny" (~2 M parameters, CPU quickstart),
// "small-100m" (~100 M parameters, CPU benchmarks), "layers-100m" (~100.7 M, 98% in
// its 14 decoder layers: the FSDP memory benchmark).
// Returns kNotFound "unknown model preset 'x' (known: ...)" otherwise.
Result<ModelConfig> PresetConfig(const std::string& name);
std::vector<std::string> PresetNames();

// Parses HF config.json text. `file` names it in messages. Missing required
// keys, a non-Llama architecture or tied embeddings are kInvalidArgument.
Result<ModelConfig> ParseHfConfig(const std::string& text, const std::string& file);
// Reads <dir>/config.json. kNotFound when absent.
Result<ModelConfig> ReadHfConfig(const std::string& dir);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_MODEL_CONFIG_H_
