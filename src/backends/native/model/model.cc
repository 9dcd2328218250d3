#include "backends/native/model/model.h"

#include <ATen/CPUGeneratorImpl.h>

#include <cmath>
#include <string>
#include <c10/core/GradMode.h>

#include "backends/native/model/fused_ops.h"
#include "backends/native/model/rms_norm.h"
#include "backends/native/model/swiglu.h"
#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

// RMSNorm (Zhang & Sennrich 2019): y = x / sqrt(mean(x²) + eps) · weight,
// the statistic in float32 (at least) whatever the model dtype, as HF does
// (rms_norm.h); one fused op where fused_ops.h serves x.
at::Tensor rmsnorm_forward(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (fused::Available(x)) return fused::RmsNorm(x, weight, eps);
  return rms_norm(x, weight, eps);
}

// y = x·Wᵀ for projection p of layer `layer` (weights w), through the model's override when it has one.
at::Tensor project(const Model& m, size_t layer, const LayerWeights& w, Projection p, const at::Tensor& x) {
  if (m.projections) return m.projections->Forward(layer, p, x);
  return at::linear(x, layer_projection(w, p));
}

// `whole` when it is `parts` side by side in one storage, rows after rows (a
// LayerWeights' wqkv or w_gate_up, still the storage of its parts), under
// InferenceMode (fused::InferenceOnly) and with no override computing the
// projections; undefined otherwise. Pointer checks only: no ATen op.
at::Tensor joined_projection(const Model& m, const at::Tensor& whole, std::initializer_list<const at::Tensor*> parts) {
  if (m.projections || !whole.defined() || !fused::InferenceOnly()) return {};
  const char* next = static_cast<const char*>(whole.data_ptr());
  int64_t rows = 0;
  for (const at::Tensor* p : parts) {
    if (!p->defined() || !p->is_contiguous() || p->data_ptr() != next || p->size(1) != whole.size(1)) return {};
    next += p->nbytes();
    rows += p->size(0);
  }
  return rows == whole.size(0) ? whole : at::Tensor();
}

// Rotary embeddings (Su et al. 2021, RoFormer), rotate-half form: the head dim
// is split in halves (x1, x2) and each pair is rotated by the angle pos·θ_i:
//   x' = x·cos + rotate_half(x)·sin,   rotate_half(x) = (−x2, x1).
// x: (B,H,T,HD); cos, sin: (T,HD).
at::Tensor rope_apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  at::Tensor x1 = x.narrow(-1, 0, half);
  at::Tensor x2 = x.narrow(-1, half, half);
  at::Tensor rotated = at::cat({-x2, x1}, -1);
  return x * cos + rotated * sin;
}

// A decode step's position on the device (model_decode_step): the token's
// position, a (1) int64 tensor, and, where the composite ops attend (no
// fused attention for the device and dtype), which of the cache's positions
// it sees, (1, capacity) bool (those <= pos).
struct DevicePosition {
  at::Tensor pos;
  at::Tensor visible;
};

// The cache positions a query at `pos` sees: (1, capacity) bool, those <= pos.
at::Tensor VisiblePositions(const at::Tensor& pos, int64_t capacity) {
  return at::arange(capacity, pos.options()).le(pos).view({1, capacity});
}

// Projections of h split into heads, rotated: q (B,NH,T,HD), k and v (B,NKV,T,HD).
struct HeadsQkv {
  at::Tensor q, k, v;
};
HeadsQkv qkv_forward(const Model& model, size_t layer, const LayerWeights& w, const at::Tensor& wqkv,
                     const at::Tensor& h, const at::Tensor& cos, const at::Tensor& sin) {
  const ModelConfig& c = model.config;
  const int64_t B = h.size(0), T = h.size(1), HD = c.HeadDim();
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads;
  at::Tensor q, k, v;
  if (wqkv.defined()) {
    std::vector<at::Tensor> parts = at::linear(h, wqkv).split_with_sizes({NH * HD, NKV * HD, NKV * HD}, -1);
    q = parts[0], k = parts[1], v = parts[2];
  } else {
    q = project(model, layer, w, Projection::kQ, h);
    k = project(model, layer, w, Projection::kK, h);
    v = project(model, layer, w, Projection::kV, h);
  }
  return {rope_apply(q.view({B, T, NH, HD}).transpose(1, 2), cos, sin),
          rope_apply(k.view({B, T, NKV, HD}).transpose(1, 2), cos, sin), v.view({B, T, NKV, HD}).transpose(1, 2)};
}

// One position (B,NH,1,HD) against keys/values (B,NKV,S,HD), unmasked or with
// `visible` (1,S): the rep query heads of each key/value head stand as its
// rep "positions", so K/V are read as they are, never repeated. Head h =
// kv·rep + r, the grouped-query order. → (B,1,NH·HD).
at::Tensor one_position_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                  const std::optional<at::Tensor>& visible) {
  const int64_t B = q.size(0), NH = q.size(1), HD = q.size(3), NKV = k.size(1), rep = NH / NKV;
  std::optional<at::Tensor> mask;
  if (visible) mask = visible->expand({rep, k.size(2)});
  at::Tensor y = compat::ScaledDotProductAttention(q.reshape({B, NKV, rep, HD}), k, v, /*is_causal=*/false,
                                                   mask);  // (B,NKV,rep,HD)
  return y.reshape({B, 1, NH * HD});
}

// Causal self-attention with rotary positions and an optional KV cache.
// h: (B,T,C) -> (B,T,C). pos0 is the absolute position of h's first token;
// with `device_pos` (a decode step, T == 1) the position is on the device
// instead: the fused ops read it there and attend over positions 0..pos; the
// composite ops attend over the cache's whole capacity, masked.
at::Tensor attention_forward(const Model& model, size_t layer, const LayerWeights& w, const at::Tensor& h,
                             const at::Tensor& cos, const at::Tensor& sin, KvCache* cache, int64_t pos0,
                             const DevicePosition* device_pos = nullptr) {
  const ModelConfig& c = model.config;
  const int64_t B = h.size(0), T = h.size(1), HD = c.HeadDim();
  const int64_t NH = c.n_heads, NKV = c.n_kv_heads;
  const at::Tensor wqkv = joined_projection(model, w.wqkv, {&w.wq, &w.wk, &w.wv});
  const bool fused_attention = (wqkv.defined() || model.projections) && cache != nullptr && fused::AttentionAvailable(h, HD);
  // One projection (an override's three, side by side: a 4-bit model's).
  auto joined_qkv = [&]() {
    return wqkv.defined() ? at::linear(h, wqkv)
                          : at::cat({project(model, layer, w, Projection::kQ, h), project(model, layer, w, Projection::kK, h),
                                     project(model, layer, w, Projection::kV, h)},
                                    -1);
  };
  if (device_pos != nullptr && fused_attention) {
    // The fused ops below at the position on the device: the same kernels, so the same bits as the host's position.
    at::Tensor rotated =
        fused::RopeCacheAt(joined_qkv(), cos, sin, cache->k[layer], cache->v[layer], device_pos->pos, NH, NKV);
    return project(model, layer, w, Projection::kO,
                   fused::DecodeAttentionAt(rotated, cache->k[layer], cache->v[layer], device_pos->pos));
  }
  if (device_pos != nullptr) {
    HeadsQkv heads = qkv_forward(model, layer, w, wqkv, h, cos, sin);
    cache->k[layer].index_copy_(2, device_pos->pos, heads.k);
    cache->v[layer].index_copy_(2, device_pos->pos, heads.v);
    const at::Tensor visible = device_pos->visible.defined() ? device_pos->visible
                                                             : VisiblePositions(device_pos->pos, cache->k[layer].size(2));
    return project(model, layer, w, Projection::kO,
                   one_position_attention(heads.q, cache->k[layer], cache->v[layer], visible));
  }
  at::Tensor q, k, v;
  if (fused_attention) {
    // One projection, then one op for the rotation and the cache's write; a
    // decode step's attention is one op more.
    at::Tensor rotated =
        fused::RopeCache(joined_qkv(), cos, sin, cache->k[layer], cache->v[layer], pos0, NH, NKV);  // (B,T,NH,HD)
    if (T == 1)
      return project(model, layer, w, Projection::kO,
                     fused::DecodeAttention(rotated, cache->k[layer], cache->v[layer], pos0 + 1));
    q = rotated.transpose(1, 2);
    k = cache->k[layer].narrow(2, 0, pos0 + T);
    v = cache->v[layer].narrow(2, 0, pos0 + T);
  } else {
    HeadsQkv heads = qkv_forward(model, layer, w, wqkv, h, cos, sin);
    q = heads.q, k = heads.k, v = heads.v;
    // With a cache: append this chunk's keys/values, attend over all S = pos0+T.
    if (cache != nullptr) {
      cache->k[layer].narrow(2, pos0, T).copy_(k);
      cache->v[layer].narrow(2, pos0, T).copy_(v);
      k = cache->k[layer].narrow(2, 0, pos0 + T);
      v = cache->v[layer].narrow(2, 0, pos0 + T);
    }
  }
  const int64_t S = k.size(2);
  const int64_t rep = c.n_heads / c.n_kv_heads;
  if (T == 1 && rep > 1)  // one position (a decode step) attends to every key, unmasked
    return project(model, layer, w, Projection::kO, one_position_attention(q, k, v, std::nullopt));
  // Grouped-query attention (Ainslie et al. 2023): each of the NKV key/value
  // heads serves rep = NH/NKV query heads; k and v stay at NKV heads
  // (compat::ScaledDotProductAttention repeats them only where libtorch's
  // kernel cannot take them grouped).
  // Query i (absolute position pos0+i) may see keys 0..pos0+i.
  //   T == S: the usual causal triangle;  T == 1: every cached key;
  //   otherwise (a chunk after a cached prefix): an explicit (T,S) mask.
  bool is_causal = (T == S) && T > 1;
  std::optional<at::Tensor> mask;
  if (T != S && T > 1) {
    at::Tensor qpos = at::arange(pos0, pos0 + T, at::TensorOptions().dtype(at::kLong)).unsqueeze(1);
    at::Tensor kpos = at::arange(0, S, at::TensorOptions().dtype(at::kLong)).unsqueeze(0);
    mask = kpos.le(qpos).to(h.device());
  }
  at::Tensor y = compat::ScaledDotProductAttention(q, k, v, is_causal, mask);  // (B,NH,T,HD)
  y = y.transpose(1, 2).reshape({B, T, c.n_heads * HD});
  return project(model, layer, w, Projection::kO, y);
}

// SwiGLU feed-forward (Shazeer 2020): down( silu(gate(h)) ⊙ up(h) ); the
// gating is swiglu.h's (its autograd function where a graph is built).
at::Tensor mlp_forward(const Model& m, size_t layer, const LayerWeights& w, const at::Tensor& h) {
  if (const at::Tensor w_gate_up = joined_projection(m, w.w_gate_up, {&w.w_gate, &w.w_up}); w_gate_up.defined()) {
    at::Tensor gate_up = at::linear(h, w_gate_up);  // (..., 2F): the gate's F columns, then up's
    if (fused::Available(gate_up)) return project(m, layer, w, Projection::kDown, fused::SiluMul(gate_up));
    std::vector<at::Tensor> halves = gate_up.chunk(2, -1);
    return project(m, layer, w, Projection::kDown, swiglu(halves[0], halves[1]));
  }
  at::Tensor gate = project(m, layer, w, Projection::kGate, h), up = project(m, layer, w, Projection::kUp, h);
  return project(m, layer, w, Projection::kDown, swiglu(gate, up));
}

// Rotary angles θ_i = theta^(−2i/HD), i < HD/2; table[pos] = (pos·θ, pos·θ), on `device`.
void rope_tables_set(Model& m, const at::Device& device) {
  const ModelConfig& config = m.config;
  const int64_t HD = config.HeadDim();
  at::Tensor inv_freq =
      at::pow(config.rope_theta, at::arange(0, HD, 2, at::kFloat) / static_cast<double>(HD)).reciprocal();
  at::Tensor pos = at::arange(0, config.max_seq_len, at::kFloat);
  at::Tensor freqs = at::outer(pos, inv_freq);  // (max_seq_len, HD/2)
  at::Tensor angles = at::cat({freqs, freqs}, -1);
  m.rope_cos = angles.cos().to(device);
  m.rope_sin = angles.sin().to(device);
}

}  // namespace

const char* projection_module(Projection p) {
  static const char* const kNames[kProjectionCount] = {"self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj",
                                                       "self_attn.o_proj", "mlp.gate_proj",    "mlp.up_proj",
                                                       "mlp.down_proj"};
  return kNames[static_cast<int>(p)];
}

at::Tensor& layer_projection(LayerWeights& w, Projection p) {
  switch (p) {
    case Projection::kQ: return w.wq;
    case Projection::kK: return w.wk;
    case Projection::kV: return w.wv;
    case Projection::kO: return w.wo;
    case Projection::kGate: return w.w_gate;
    case Projection::kUp: return w.w_up;
    case Projection::kDown: break;
  }
  return w.w_down;
}

const at::Tensor& layer_projection(const LayerWeights& w, Projection p) {
  return layer_projection(const_cast<LayerWeights&>(w), p);
}

std::vector<at::Tensor*> layer_parameters(LayerWeights& w) {
  return {&w.input_norm, &w.wq, &w.wk, &w.wv, &w.wo, &w.post_norm, &w.w_gate, &w.w_up, &w.w_down};
}

std::vector<NamedParameter> model_parameters(Model& m) {
  const ModelConfig& c = m.config;
  const int64_t C = c.dim, HD = c.HeadDim(), F = c.hidden_dim, V = c.vocab_size;
  std::vector<NamedParameter> out;
  out.push_back({"model.embed_tokens.weight", &m.embed, {V, C}});
  for (size_t i = 0; i < m.layers.size(); ++i) {
    LayerWeights& w = m.layers[i];
    const std::string p = "model.layers." + std::to_string(i) + ".";
    out.push_back({p + "input_layernorm.weight", &w.input_norm, {C}});
    out.push_back({p + "self_attn.q_proj.weight", &w.wq, {c.n_heads * HD, C}});
    out.push_back({p + "self_attn.k_proj.weight", &w.wk, {c.n_kv_heads * HD, C}});
    out.push_back({p + "self_attn.v_proj.weight", &w.wv, {c.n_kv_heads * HD, C}});
    out.push_back({p + "self_attn.o_proj.weight", &w.wo, {C, c.n_heads * HD}});
    out.push_back({p + "post_attention_layernorm.weight", &w.post_norm, {C}});
    out.push_back({p + "mlp.gate_proj.weight", &w.w_gate, {F, C}});
    out.push_back({p + "mlp.up_proj.weight", &w.w_up, {F, C}});
    out.push_back({p + "mlp.down_proj.weight", &w.w_down, {C, F}});
  }
  out.push_back({"model.norm.weight", &m.norm, {C}});
  out.push_back({"lm_head.weight", &m.lm_head, {V, C}});
  return out;
}

namespace {

// Whether p is one of the seven projections of a decoder layer of m.
bool is_projection(Model& m, const NamedParameter& p) {
  for (LayerWeights& w : m.layers)
    for (int i = 0; i < kProjectionCount; ++i)
      if (p.tensor == &layer_projection(w, static_cast<Projection>(i))) return true;
  return false;
}

// Whether p is one the joined matrices hold (q, k, v, gate, up of a layer).
bool is_joined(Model& m, const NamedParameter& p) {
  for (LayerWeights& w : m.layers)
    for (const at::Tensor* t : {&w.wq, &w.wk, &w.wv, &w.w_gate, &w.w_up})
      if (p.tensor == t) return true;
  return false;
}

// Allocates layer w's wqkv and w_gate_up and makes wq, wk, wv, w_gate, w_up
// row ranges of them (LayerWeights).
void allocate_joined(const ModelConfig& c, LayerWeights& w, const at::TensorOptions& options) {
  const int64_t C = c.dim, q = c.n_heads * c.HeadDim(), kv = c.n_kv_heads * c.HeadDim(), F = c.hidden_dim;
  w.wqkv = at::empty({q + 2 * kv, C}, options);
  w.wq = w.wqkv.narrow(0, 0, q);
  w.wk = w.wqkv.narrow(0, q, kv);
  w.wv = w.wqkv.narrow(0, q + kv, kv);
  w.w_gate_up = at::empty({2 * F, C}, options);
  w.w_gate = w.w_gate_up.narrow(0, 0, F);
  w.w_up = w.w_gate_up.narrow(0, F, F);
}

}  // namespace

Model model_create(const ModelConfig& config, const at::TensorOptions& options, ProjectionTensors projections) {
  Model m = model_create_unallocated(config, options.device());
  const bool allocate = projections == ProjectionTensors::kAllocate;
  for (NamedParameter& p : model_parameters(m))
    if (allocate ? !is_joined(m, p) : !is_projection(m, p)) *p.tensor = at::empty(p.shape, options);
  if (allocate)
    for (LayerWeights& w : m.layers) allocate_joined(config, w, options);
  return m;
}

Model model_create_unallocated(const ModelConfig& config, const at::Device& device) {
  Model m;
  m.config = config;
  m.layers.resize(static_cast<size_t>(config.n_layers));
  rope_tables_set(m, device);
  return m;
}

Model model_create_placed(const ModelConfig& config, at::ScalarType dtype, const std::vector<at::Device>& devices,
                          const LayerPlacement& placement, ProjectionTensors projections) {
  Model m;
  m.config = config;
  m.layers.resize(static_cast<size_t>(config.n_layers));
  const std::string layer_prefix = "model.layers.";
  for (NamedParameter& p : model_parameters(m)) {
    int d = placement.head_device;  // model.norm.weight, lm_head.weight
    if (p.name == "model.embed_tokens.weight") d = placement.embed_device;
    else if (p.name.compare(0, layer_prefix.size(), layer_prefix) == 0)
      d = placement.layer_device[std::stoul(p.name.substr(layer_prefix.size()))];
    if (projections == ProjectionTensors::kLeaveUndefined && is_projection(m, p)) continue;
    if (is_joined(m, p)) continue;  // below, beside its layer's other projections
    *p.tensor = at::empty(p.shape, at::TensorOptions().dtype(dtype).device(devices[static_cast<size_t>(d)]));
  }
  if (projections == ProjectionTensors::kAllocate)
    for (LayerWeights& w : m.layers) allocate_joined(config, w, w.wo.options());
  rope_tables_set(m, devices[0]);
  return m;
}

at::Generator init_generator(uint64_t seed) { return at::make_generator<at::CPUGeneratorImpl>(seed); }

void model_init_random(Model& m, uint64_t seed) {
  at::Generator gen = init_generator(seed);
  parameters_init_random(model_parameters(m), gen);
}

void parameters_init_random(const std::vector<NamedParameter>& params, at::Generator& gen) {
  c10::NoGradGuard no_grad;
  for (const NamedParameter& p : params) {
    at::Tensor cpu;
    if (p.shape.size() == 1) {
      cpu = at::ones(p.shape, at::kFloat);  // RMSNorm gains start at 1
    } else {
      cpu = at::empty(p.shape, at::kFloat);
      cpu.normal_(0.0, 0.02, gen);  // HF initializer_range
    }
    p.tensor->copy_(cpu);
  }
}

int64_t model_parameter_count(Model& m) {
  int64_t n = 0;
  for (const NamedParameter& p : model_parameters(m))
    if (p.tensor->defined()) n += p.tensor->numel();
  return n;
}

KvCache kv_cache_create(const Model& m, int64_t batch, int64_t capacity) {
  const ModelConfig& c = m.config;
  KvCache cache;
  for (int64_t i = 0; i < c.n_layers; ++i) {
    // Beside its layer (a placed model's layers are on several devices).
    const at::TensorOptions o = m.embed.options().device(m.layers[static_cast<size_t>(i)].input_norm.device());
    cache.k.push_back(at::zeros({batch, c.n_kv_heads, capacity, c.HeadDim()}, o));
    cache.v.push_back(at::zeros({batch, c.n_kv_heads, capacity, c.HeadDim()}, o));
  }
  return cache;
}

RopeRows rope_rows(const Model& m, int64_t pos0, int64_t T, at::ScalarType dtype) {
  return {m.rope_cos.narrow(0, pos0, T).to(dtype), m.rope_sin.narrow(0, pos0, T).to(dtype)};
}

at::Tensor embed_forward(const at::Tensor& embed, const at::Tensor& tokens) {
  return at::embedding(embed, tokens);  // (B,T,C)
}

namespace {

at::Tensor layer_forward(const Model& m, size_t layer, const LayerWeights& w, const at::Tensor& x,
                         const RopeRows& rope, KvCache* cache, int64_t pos0, const DevicePosition* device_pos) {
  const double eps = m.config.norm_eps;
  at::Tensor attention =
      attention_forward(m, layer, w, rmsnorm_forward(x, w.input_norm, eps), rope.cos, rope.sin, cache, pos0, device_pos);
  if (fused::Available(x)) {  // the residual's add fused with the second RMSNorm
    auto [h, normed] = fused::AddRmsNorm(x, attention, w.post_norm, eps);
    return h + mlp_forward(m, layer, w, normed);
  }
  at::Tensor h = x + attention;
  return h + mlp_forward(m, layer, w, rmsnorm_forward(h, w.post_norm, eps));
}

}  // namespace

at::Tensor decoder_layer_forward(const Model& m, size_t layer, const LayerWeights& w, const at::Tensor& x,
                                 const RopeRows& rope, KvCache* cache, int64_t pos0) {
  return layer_forward(m, layer, w, x, rope, cache, pos0, nullptr);
}

at::Tensor head_forward(const Model& m, const at::Tensor& norm, const at::Tensor& lm_head, const at::Tensor& x) {
  return at::linear(rmsnorm_forward(x, norm, m.config.norm_eps), lm_head);  // (B,T,V)
}

at::Tensor model_forward(const Model& m, const at::Tensor& tokens, KvCache* cache) {
  const int64_t T = tokens.size(1);
  const int64_t pos0 = cache ? cache->length : 0;
  at::Tensor x = embed_forward(m.embed, tokens);
  RopeRows rope = rope_rows(m, pos0, T, x.scalar_type());
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerWeights& w = m.layers[i];
    if (x.device() != w.input_norm.device()) {  // a placed model: to the layer's device
      x = x.to(w.input_norm.device());
      rope = {rope.cos.to(x.device()), rope.sin.to(x.device())};
    }
    x = decoder_layer_forward(m, i, w, x, rope, cache, pos0);
  }
  if (cache) cache->length += T;
  if (x.device() != m.norm.device()) x = x.to(m.norm.device());
  return head_forward(m, m.norm, m.lm_head, x);
}

at::Tensor model_decode_step(const Model& m, const at::Tensor& tokens, const at::Tensor& pos, KvCache& cache) {
  const at::Device device = m.embed.device();
  for (const LayerWeights& w : m.layers)
    TORCH_CHECK(w.input_norm.device() == device, "model_decode_step: a model on one device (not a placed model)");
  TORCH_CHECK(tokens.dim() == 2 && tokens.size(1) == 1 && pos.numel() == 1 && pos.device() == device,
              "model_decode_step: tokens (B,1) and a (1) position on the model's device");
  const int64_t capacity = cache.k.front().size(2);
  at::Tensor x = embed_forward(m.embed, tokens);
  const RopeRows rope{m.rope_cos.index_select(0, pos).to(x.scalar_type()),
                      m.rope_sin.index_select(0, pos).to(x.scalar_type())};  // (1,HD)
  DevicePosition device_pos{pos, {}};
  if (!fused::AttentionAvailable(x, m.config.HeadDim()))  // the composite attention's mask
    device_pos.visible = VisiblePositions(pos, capacity);
  for (size_t i = 0; i < m.layers.size(); ++i) x = layer_forward(m, i, m.layers[i], x, rope, &cache, 0, &device_pos);
  return head_forward(m, m.norm, m.lm_head, x);
}

}  // namespace native
}  // namespace protocol
