#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_FUSED_OPS_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_FUSED_OPS_H_

// The decoder layer's elementwise steps as single ops, for the forward passes
// under InferenceMode (decoding, serving; InferenceOnly()): each is one ATen op
// (registered with the dispatcher as protocol::NAME, so ATen's op counter and
// profiler see one op) that reads its inputs once and writes its outputs once,
// where model.cc's composite form runs 3 to 8 ops with a temporary each.
//
//   rms_norm          y = w ⊙ x / √(mean(x²) + ε)                  (composite: 8 ops)
//   add_rms_norm      h = x + r;  y = rms_norm(h)                  (9 ops)
//   silu_mul          [g | u] -> silu(g) ⊙ u                       (composite: 3 ops, 2 projections)
//   rope_cache        q, k rotated (RoPE, rotate-half), k and v written
//                     into the KV cache at pos..pos+T-1           (10 ops + 2 copies)
//   decode_attention  one query position against the first `length`
//                     cached positions, grouped-query heads       (SDPA and its views)
//   rope_cache_at, decode_attention_at
//                     the same at a position kept in a tensor on the device (a
//                     decode step at the device's position: model.h
//                     model_decode_step; its attention over positions 0..pos
//                     instead of the whole cache, masked). The kernel reads the
//                     position where the tensor is: no op, no copy to the host,
//                     the same launch every step (a CUDA graph replays it).
//
// Kernels: the CPU in float32 (the CPU model's dtype), sums and softmax
// accumulated in float64; and, in a build with CUDA kernels
// (PROTOCOL_CUDA_KERNELS), CUDA in float32, bfloat16 and float16, sums in
// float32 (fused_cuda.h). The CUDA kernels are used only once SetCudaKernels
// turned them on; tests/backends/gpu_test.cc holds them to the composite ops
// (passed on an H200 with libtorch 2.11, docs/performance.md).
// Elsewhere (float64, bf16 on the CPU, CUDA with them off) Available() is
// false and model.cc runs its composite ops. Each kernel equals the
// composite within the rounding of its accumulation order
// (tests/native/model/fused_ops_test.cc); rope_cache's arithmetic is the
// composite's, element for element, and its result the same bits.

#include <ATen/ATen.h>

#include <cstdint>
#include <utility>

namespace protocol {
namespace native {
namespace fused {

// True under c10::InferenceMode. Only there are the fused ops and the joined
// projections (model.h) used: they have no backward, and a forward without a
// graph inside training (a checkpointed layer's first pass, an evaluation)
// keeps the composite ops, so that its values are the bits its recomputation
// in backward, and the training loss, give.
bool InferenceOnly();
// True when the fused ops serve tensors like x here: InferenceOnly() and a
// CPU float32 tensor, or a CUDA float32/bfloat16/float16 one with the CUDA
// kernels turned on.
bool Available(const at::Tensor& x);
// The largest head dimension decode_attention serves on CUDA.
constexpr int64_t kMaxCudaHeadDim = 256;
// Available(x), and decode_attention serves heads of head_dim there.
bool AttentionAvailable(const at::Tensor& x, int64_t head_dim);

// Whether this build has the CUDA kernels.
bool CudaKernelsBuilt();
// Turns the CUDA kernels on or off for the process (off at start); returns
// whether they are on (never where CudaKernelsBuilt() is false).
bool SetCudaKernels(bool on);
bool CudaKernels();

// x (..., C), weight (C) -> (..., C).
at::Tensor RmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);
// x, r (..., C) -> {h = x + r, RmsNorm(h, weight, eps)}.
std::pair<at::Tensor, at::Tensor> AddRmsNorm(const at::Tensor& x, const at::Tensor& r, const at::Tensor& weight,
                                             double eps);
// gate_up (..., 2F), the gate's F columns first -> (..., F).
at::Tensor SiluMul(const at::Tensor& gate_up);
// qkv (B,T,(NH+2·NKV)·HD), the projections' outputs side by side (q heads,
// then k heads, then v heads); cos, sin (T,HD) of positions pos..pos+T-1.
// Writes k rotated and v into k_cache and v_cache (B,NKV,capacity,HD) at
// pos..pos+T-1 and returns q rotated, (B,T,NH,HD).
// REQUIRES: pos + T <= capacity; the caches contiguous.
at::Tensor RopeCache(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                     at::Tensor& v_cache, int64_t pos, int64_t n_heads, int64_t n_kv_heads);
// q (B,1,NH,HD) against cached positions 0..length-1 of k_cache, v_cache
// (B,NKV,capacity,HD); query head h reads key/value head h / (NH/NKV):
// softmax(q·Kᵀ/√HD)·V -> (B,1,NH·HD), the o projection's input.
at::Tensor DecodeAttention(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                           int64_t length);
// RopeCache of one position (T == 1) at `pos`, a (1) int64 tensor on qkv's
// device. On CUDA a position outside the cache writes nothing to it (the host
// cannot check it without reading it); on the CPU it is an error.
at::Tensor RopeCacheAt(const at::Tensor& qkv, const at::Tensor& cos, const at::Tensor& sin, at::Tensor& k_cache,
                       at::Tensor& v_cache, const at::Tensor& pos, int64_t n_heads, int64_t n_kv_heads);
// DecodeAttention over positions 0..pos, `pos` a (1) int64 tensor on q's
// device (on CUDA the length is clamped to 1..capacity).
at::Tensor DecodeAttentionAt(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                             const at::Tensor& pos);

}  // namespace fused
}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_FUSED_OPS_H_
