#ifndef PROTOCOL_BACKENDS_NATIVE_QUANT_QUANTIZED_MODEL_H_
#define PROTOCOL_BACKENDS_NATIVE_QUANT_QUANTIZED_MODEL_H_

// 4-bit models (`quantization: nf4`) and QLoRA (Dettmers et al. 2023).
//
// What is 4-bit: the seven projections of every decoder layer (q, k, v, o,
// gate, up, down), stored as NF4 blocks of 64 with a float32 absmax each, or
// with double-quantized absmax (nf4.h), and dequantized on use (to the
// activations' dtype, one projection at a time) by the 4-bit linear
// (nf4_linear.h), which keeps the 4-bit storage, not the dequantized weight,
// for the backward. What stays in the model's dtype: the token embedding, the
// RMSNorm gains and lm_head — as in QLoRA / bitsandbytes, which quantize only
// the Linear layers inside the decoder.
//
// Memory of the 4-bit weights: per projection of n weights, ceil(n/64) blocks
// of 32 bytes of codes + 4 bytes of absmax = 36 bytes per 64 weights
// (4.5 bits/weight: 1/8 of float32 plus 1/64, 1/4 of bf16 plus 1/32); with
// double quantization 33 bytes per block + 4 per 256 blocks + 4 per projection
// (≈ 4.127 bits/weight; nf4_storage_bytes).
//
// QLoRA: the 4-bit base is frozen (no gradient, no optimizer state) and LoRA
// adapters (lora.h) on the seven projections are trained; the forward is
//   y = x·dequant(W_nf4)ᵀ + (alpha/r)·(x·Aᵀ)·Bᵀ.
// Inference on a CPU keeps the projections dequantized when they fit
// (nf4_prepare_inference below); training always dequantizes on use.
// On a GPU the dequantization is one kernel (nf4_cuda.h), and a decode row
// goes through the batch-1 GEMV (nf4_gemv.h) once the project's CUDA kernels
// are turned on. Not built: paged optimizers.

#include <ATen/ATen.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/quant/lora.h"
#include "backends/native/model/model.h"
#include "backends/native/quant/nf4.h"

namespace protocol {
namespace native {

// The projections of a 4-bit model, with optional LoRA adapters on top.
class Nf4Projections : public ProjectionOverride {
 public:
  at::Tensor Forward(size_t layer, Projection p, const at::Tensor& x) const override;

  std::vector<std::array<Nf4Tensor, kProjectionCount>> layers;  // L of them, in Projection order
  std::shared_ptr<const LoraAdapters> lora;                     // null: base model only
  // Inference only (nf4_keep_dequantized): every projection dequantized once,
  // in the compute dtype; Forward then multiplies by these without gradient
  // mode. Empty: dequantized on use.
  std::vector<std::array<at::Tensor, kProjectionCount>> dequantized;
};

// Quantizes every decoder-layer projection of `model` to NF4 (double_quant:
// with double-quantized absmax), releases the full-precision projection
// tensors and installs the Nf4Projections override.
// REQUIRES: the model's weights are set and it is not already quantized.
void model_quantize_nf4(Model& model, bool double_quant = false);
// Sets the weights of a 4-bit model one tensor at a time, so that the load
// never holds more than one projection in full precision: every parameter
// is set by `fill` in model_parameters order, one at a time; the embedding,
// the norms and lm_head into the model's tensors, each decoder projection
// into a transient of the model's dtype on its layer's device, which is
// quantized (nf4_quantize) and released before the next is read. The result
// is model_quantize_nf4 of the model filled whole: the same codes and scales.
// Beyond the finished tensors the load holds one projection in the compute
// dtype and its quantization workspace (docs/estimates.md).
// REQUIRES: `model` from model_create or model_create_placed with
// ProjectionTensors::kLeaveUndefined. Errors: fill's (the model is then
// incomplete and not 4-bit).
Status model_fill_nf4(Model& model, const ParameterFill& fill, bool double_quant = false);
// The model's NF4 projections; null when the model is not 4-bit.
const Nf4Projections* model_nf4(const Model& model);
// Bytes held by the NF4 projections: packed codes + absmax scales (or their
// double-quantized form).
int64_t nf4_weight_bytes(const Model& model);
// What nf4_weight_bytes must be for a 4-bit model of `config`: Σ over the
// L·7 projections of nf4_storage_bytes(out·in, double_quant); without double
// quantization 36 bytes per started block of 64 weights of each projection.
int64_t nf4_expected_weight_bytes(const ModelConfig& config, bool double_quant = false);
// Inference from a 4-bit model: per-token dequantization of every projection
// costs more than the matrix products on a CPU (memory traffic), so when the
// dequantized projections fit, they are made once and kept.
//   nf4_dequantized_bytes  bytes the kept projections take in dtype_bytes per weight
//   nf4_keep_dequantized   dequantizes every projection once into `dtype` on
//                          its device (the outputs equal per-use dequantization
//                          exactly: the same float32 values, cast the same way)
// REQUIRES for nf4_keep_dequantized: a 4-bit model used without gradients.
int64_t nf4_dequantized_bytes(const ModelConfig& config, int64_t dtype_bytes);
void nf4_keep_dequantized(Model& model, at::ScalarType dtype);
// Whether the kept projections fit: on a CPU device when /proc/meminfo's
// MemAvailable is at least twice `bytes`; never on CUDA (dequantized on use,
// as bitsandbytes' 4-bit kernels do). `why` gets the figures either way.
bool nf4_keep_dequantized_fits(const at::Device& device, int64_t bytes, std::string* why);

// Attaches LoRA adapters to a 4-bit model (the adapters are shared, not copied:
// training them changes the model's output). kInvalidArgument when the model
// is not 4-bit.
Status model_attach_lora(Model& model, std::shared_ptr<const LoraAdapters> lora);

// What the training workloads on a 4-bit model are (both train LoRA adapters
// on the frozen NF4 base of the model's loaded weights):
//   finetune  QLoRA (Dettmers et al. 2023) on the dataset's loss mask
//             (instruction records: the response tokens);
//   pretrain  QLoRA continued pretraining: the model's real weights loaded
//             and frozen in NF4, LoRA on all seven projections, the
//             causal-LM loss on every token of the raw text. Training 4-bit
//             codes from a random start has no gradient to follow, so a
//             4-bit pretrain needs weights (nf4_pretrain_missing_weights).
enum class QloraKind { kFinetune, kContinuedPretraining };

// Why a 4-bit pretrain of model `model_name` cannot start: its path has no
// weights (model.safetensors or model.safetensors.index.json). Empty when it has.
std::string nf4_pretrain_missing_weights(const std::string& model_name, const std::string& path);
// Method text for measurements of a QLoRA run, e.g. "QLoRA: 4-bit NF4 base
// frozen, LoRA rank 8 alpha 16 on q,k,v,o,gate,up,down", or for continued
// pretraining "QLoRA continued pretraining: 4-bit NF4 base (the model's
// weights) frozen, LoRA rank 8 alpha 16 on q,k,v,o,gate,up,down, causal-LM
// loss on every token". Double quantization and a frozen A are named when set.
std::string qlora_method(const LoraAdapters& lora, QloraKind kind = QloraKind::kFinetune, bool double_quant = false,
                         bool freeze_a = false);
// Method text for inference from 4-bit weights: "4-bit NF4 weights: <how the
// projections are dequantized>; embedding, norms, lm_head full precision",
// naming double quantization when it is on.
std::string nf4_inference_method(bool double_quant, const std::string& dequantization);
// The decision above, applied to an inference model on `device` in `dtype`:
// keeps the dequantized projections when they fit and returns the method text.
std::string nf4_prepare_inference(Model& model, const at::Device& device, at::ScalarType dtype, bool double_quant);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_QUANT_QUANTIZED_MODEL_H_
