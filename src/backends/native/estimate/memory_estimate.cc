#include "backends/native/estimate/memory_estimate.h"

#include <algorithm>
#include <set>

#include "backends/native/model/decode_bucket_capacity.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

constexpr int64_t kBlock = 64;           // NF4 weights per block (nf4.h kNf4BlockSize)
constexpr int64_t kDqGroup = 256;        // blocks per double-quantization group (kNf4DqGroupSize)
constexpr int64_t kRecordBytes = 36;     // 32 code bytes + float32 absmax (kNf4RecordBytes)
constexpr int64_t kDqRecordBytes = 8456; // 256·33 + 8 (kNf4DqRecordBytes)
constexpr int64_t kAdamwChunk = int64_t{1} << 24;  // train.h kAdamwChunkElements
constexpr int64_t kQuantizeChunk = 16384 * 64;     // nf4.h kNf4QuantizeChunkBlocks blocks of 64
constexpr int64_t kLossChunk = int64_t{1} << 22;   // chunked_loss.h kLossChunkElements

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t F32Copy(int64_t e) { return e != 4 ? 1 : 0; }  // f

int64_t Sum(const std::vector<MemoryTerm>& terms) {
  int64_t s = 0;
  for (const MemoryTerm& t : terms) s += t.bytes;
  return s;
}

std::string Terms(const std::vector<MemoryTerm>& terms) {
  std::vector<std::string> parts;
  for (const MemoryTerm& t : terms)
    if (t.bytes > 0) parts.push_back(fmt::format("{} {}", t.name, FormatBytes(t.bytes)));
  return parts.empty() ? "nothing" : Join(parts, " + ");
}

// One candidate for the peak: its name and what it holds on top of the resident state.
struct Phase {
  std::string name;
  std::vector<MemoryTerm> terms;
};

MemoryEstimate Finish(std::vector<MemoryTerm> resident, const std::vector<Phase>& phases) {
  MemoryEstimate out;
  out.resident = std::move(resident);
  const Phase* best = nullptr;
  for (const Phase& p : phases)
    if (best == nullptr || Sum(p.terms) > Sum(best->terms)) best = &p;
  if (best) {
    out.peak_phase = best->name;
    out.at_peak = best->terms;
  }
  out.peak_bytes = Sum(out.resident) + Sum(out.at_peak);
  for (const Phase& p : phases) out.phases.push_back({p.name, Sum(p.terms)});
  return out;
}

// What both training estimates share (memory_estimate.h's legend): e, f, W,
// B·T, the per-token activation bytes a, and the kept activations.
struct TrainingQuantities {
  int64_t e = 4, W = 1, L = 0, C = 0, V = 0;
  int64_t N = 0;                       // parameters
  std::vector<int64_t> units;          // FSDP units: embedding, layers, final norm + lm_head
  int64_t layer_act = 0;               // a·B·T: one layer's activations
  int64_t loss = 0;                    // logits and cross-entropy
  int64_t largest_projection = 0;      // elements of the largest projection
  std::vector<int64_t> kept_through;   // Σ_{j<=l} kept(j), kept(j) = e·C·B·T if j is checkpointed else a·B·T
  int64_t kept_all = 0;                // Σ_l kept(l)
};

TrainingQuantities TrainingQuantitiesOf(const TrainingMemoryShape& s) {
  const ModelConfig& c = s.config;
  TrainingQuantities q;
  q.e = s.dtype_bytes;
  q.W = std::max<int64_t>(1, s.world);
  q.L = c.n_layers;
  q.C = c.dim;
  q.V = c.vocab_size;
  const int64_t BT = s.micro_batch * s.seq_len;
  q.units = unit_parameter_counts(c);
  q.N = c.ParameterCount();
  q.layer_act = layer_activation_bytes_per_token(c, q.e, s.seq_len, s.attention_probs_kept) * BT;
  q.loss = loss_bytes(c, s.micro_batch, s.seq_len, q.e);
  std::vector<int64_t> pn = projection_numels(c);
  q.largest_projection = *std::max_element(pn.begin(), pn.end());
  // Kept activations of layer l between its forward and its backward.
  auto kept = [&](int64_t l) {
    const bool ck = s.checkpoint_every > 0 && l % s.checkpoint_every == 0;
    return ck ? q.e * q.C * BT : q.layer_act;
  };
  q.kept_through.assign(static_cast<size_t>(q.L), 0);
  for (int64_t l = 0, acc = 0; l < q.L; ++l) q.kept_through[static_cast<size_t>(l)] = acc += kept(l);
  q.kept_all = q.L > 0 ? q.kept_through.back() : 0;
  return q;
}

// Full precision: resident weights, master copy and AdamW state (or their FSDP
// slices); phases: the head's, each layer's (last to first) and the
// embedding's backward, then the optimizer step.
// The terms of an estimate before its peak is chosen.
struct Breakdown {
  std::vector<MemoryTerm> resident;
  std::vector<Phase> phases;
};

Breakdown FullPrecisionTraining(const TrainingMemoryShape& s, const TrainingQuantities& q) {
  const int64_t e = q.e, W = q.W;
  const bool sharded = s.sharded;
  const std::vector<int64_t>& units = q.units;
  std::vector<MemoryTerm> resident;
  // Gradient bytes of each unit once formed.
  std::vector<int64_t> grad(units.size());
  int64_t grads_all = 0, largest = 0;
  for (size_t u = 0; u < units.size(); ++u) {
    grad[u] = sharded ? 4 * shard_elements(units[u], W) : e * units[u];
    grads_all += grad[u];
  }
  if (sharded) {
    int64_t slices = 0;
    for (int64_t n : units) {
      slices += shard_elements(n, W);
      largest = std::max(largest, shard_elements(n, W));
    }
    resident.push_back({"float32 master slice", 4 * slices});
    resident.push_back({"AdamW m, v", 8 * slices});
  } else {
    resident.push_back({fmt::format("weights ({} B/param)", e), e * q.N});
    if (F32Copy(e)) resident.push_back({"float32 master copy", 4 * q.N});
    resident.push_back({"AdamW m, v", 8 * q.N});
    // AdamW steps runs of at most kAdamwChunk elements (or one larger tensor):
    // the embedding / lm_head (V·C), or a run of smaller tensors up to the chunk.
    largest = std::min(q.N, std::max(q.V * q.C, kAdamwChunk));
    if (!s.fused_adamw) resident.push_back({"AdamW workspace (√v̂ + ε of its largest run)", 4 * largest});
  }
  // Gathered unit u in backward: e·n + max(e,4)·Ŝ (sharded); nothing in one process.
  auto gathered = [&](size_t u) -> int64_t {
    if (!sharded) return 0;
    const int64_t padded = shard_elements(units[u], W) * W;
    return e * units[u] + std::max<int64_t>(e, 4) * padded;
  };
  const bool accum = s.grad_accum > 1;
  // Prefetch (sharded only): unit u's gather issued ahead, and unit u's flat
  // gradient while its reduction is in flight.
  const bool ahead = sharded && s.prefetch;
  auto prefetched = [&](size_t u) -> int64_t { return u == 0 ? 0 : e * shard_elements(units[u], W) * W; };
  auto in_flight = [&](size_t u) -> int64_t { return s.reduce_bytes * shard_elements(units[u], W) * W; };
  std::vector<Phase> phases;
  {
    Phase p{"backward of the head (logits, loss)", {}};
    if (accum) p.terms.push_back({"gradients", grads_all});
    p.terms.push_back({"activations", q.kept_all});
    if (sharded) p.terms.push_back({"gathered head + its gradients", gathered(units.size() - 1)});
    if (ahead) p.terms.push_back({"next unit prefetched", prefetched(units.size() - 2)});
    p.terms.push_back({"logits and cross-entropy", q.loss});
    phases.push_back(std::move(p));
  }
  // Layers, last to first; gradients of the units after l are formed.
  int64_t formed = grad.back();
  for (int64_t l = q.L - 1; l >= 0; --l) {
    Phase p{fmt::format("backward of decoder layer {}", l), {}};
    p.terms.push_back({"gradients", accum ? grads_all : formed});
    p.terms.push_back({"activations", q.kept_through[static_cast<size_t>(l)]});
    if (sharded) p.terms.push_back({"gathered layer + its gradients", gathered(static_cast<size_t>(1 + l))});
    if (ahead) {
      p.terms.push_back({"next unit prefetched", prefetched(static_cast<size_t>(l))});
      p.terms.push_back({"previous unit's gradient in flight", in_flight(static_cast<size_t>(2 + l))});
    }
    p.terms.push_back({"one layer's activations", q.layer_act});
    phases.push_back(std::move(p));
    formed += grad[static_cast<size_t>(1 + l)];
  }
  {
    Phase p{"backward of the embedding", {}};
    p.terms.push_back({"gradients", accum ? grads_all : formed});
    if (sharded) p.terms.push_back({"embedding gradients (no gather: its backward reads no weight)", gathered(0)});
    if (ahead && units.size() > 2) p.terms.push_back({"previous unit's gradient in flight", in_flight(1)});
    phases.push_back(std::move(p));
  }
  // FSDP's step on a slice: its √v̂ + ε and a temporary of the slice (none
  // when fused: one pass in place). One process: the float32 copies of a
  // run's non-float32 gradients (√v̂ + ε is in the resident workspace, or
  // in registers when fused).
  const int64_t temporaries = sharded ? (s.fused_adamw ? 0 : 8) : 4 * F32Copy(e);
  phases.push_back({"optimizer step", {{"gradients", grads_all}, {"AdamW temporaries", temporaries * largest}}});
  return {std::move(resident), std::move(phases)};
}

// 4-bit base + LoRA: resident NF4 projections (or their record slices), the
// frozen rest in the compute dtype, the adapters with their gradients and
// AdamW state; phases: the head's and the last layer's backward, and the
// load (one projection in full precision at a time).
Breakdown Nf4LoraTraining(const TrainingMemoryShape& s, const TrainingQuantities& q) {
  const ModelConfig& c = s.config;
  const int64_t e = q.e, W = q.W, L = q.L, C = q.C, V = q.V;
  const bool sharded = s.sharded;
  const std::vector<int64_t> pn = projection_numels(c);
  std::vector<MemoryTerm> resident;
  int64_t frozen = 0;  // embedding, norms, lm_head elements this rank holds
  if (sharded) {
    frozen = shard_elements(V * C, W) + L * shard_elements(2 * C, W) + shard_elements(C + V * C, W);
    resident.push_back({fmt::format("NF4 projections (1/{} of the records)", W),
                        L * nf4_layer_shard_bytes(c, s.double_quant, W)});
  } else {
    frozen = 2 * V * C + C + 2 * L * C;
    int64_t per_layer = 0;
    for (int64_t n : pn) per_layer += nf4_bytes(n, s.double_quant);
    resident.push_back({"NF4 projections", L * per_layer});
  }
  resident.push_back({sharded ? "frozen embedding, norms, lm_head (slice)" : "frozen embedding, norms, lm_head",
                      e * frozen});
  const int64_t adapters = adapter_parameter_count(c, s.lora_rank);
  const int64_t adapters_a = adapter_a_parameter_count(c, s.lora_rank);
  const int64_t trained = s.lora_freeze_a ? adapters - adapters_a : adapters;
  resident.push_back({"LoRA adapters, their gradients, AdamW m, v", 4 * adapters + 12 * trained});
  // AdamW's workspace: √v̂ + ε of its largest run of float32 adapters (train.h; none when fused).
  if (!s.fused_adamw)
    resident.push_back({"AdamW workspace (√v̂ + ε of its largest run)", 4 * std::min(trained, kAdamwChunk)});
  const int64_t dequant = dequantize_workspace_bytes(q.largest_projection);
  const int64_t head_gathered = sharded ? e * shard_elements(C + V * C, W) * W : 0;
  const int64_t nf4_layer = shard_elements(nf4_layer_records(c, s.double_quant), W) * W * nf4_record_bytes(s.double_quant);
  const bool ahead = sharded && s.prefetch;
  std::vector<Phase> phases;
  {
    Phase p{"backward of the head (logits, loss)", {}};
    p.terms.push_back({"activations", q.kept_all});
    if (sharded) p.terms.push_back({"gathered head", head_gathered});
    if (ahead && L > 0) p.terms.push_back({"next NF4 layer prefetched", nf4_layer});
    p.terms.push_back({"logits and cross-entropy", q.loss});
    phases.push_back(std::move(p));
  }
  {
    // The largest of the layer phases is the last layer's: every activation is still kept.
    Phase p{fmt::format("backward of decoder layer {}", L - 1), {}};
    p.terms.push_back({"activations", q.kept_all});
    if (sharded) p.terms.push_back({"gathered NF4 layer", nf4_layer});
    if (ahead && L > 1) {
      p.terms.push_back({"next NF4 layer prefetched", nf4_layer});
      p.terms.push_back({"previous layer's adapter gradients in flight", s.reduce_bytes * trained / std::max<int64_t>(1, L)});
    }
    p.terms.push_back({"one projection dequantized", dequant});
    p.terms.push_back({"one layer's activations", q.layer_act});
    phases.push_back(std::move(p));
  }
  {
    // Each projection is read, quantized and freed before the next (model_fill_nf4; sharded:
    // ShardedQlora::Create, which keeps the layer's NF4 projections until it cuts this rank's
    // shard of their records). An upper bound: the adapters' gradients and AdamW moments,
    // counted in the resident terms, do not exist yet.
    Phase p{"load (one projection at a time)", {}};
    p.terms.push_back({"one projection in the compute dtype", e * q.largest_projection});
    p.terms.push_back({"quantization workspace", quantize_workspace_bytes(q.largest_projection)});
    if (sharded) p.terms.push_back({"the layer's NF4 before sharding", nf4_layer});
    phases.push_back(std::move(p));
  }
  return {std::move(resident), std::move(phases)};
}

}  // namespace

int64_t layer_parameter_count(const ModelConfig& c) {
  const int64_t HD = c.HeadDim();
  return c.dim * c.n_heads * HD + 2 * c.dim * c.n_kv_heads * HD + c.n_heads * HD * c.dim + 3 * c.dim * c.hidden_dim +
         2 * c.dim;
}

std::vector<int64_t> unit_parameter_counts(const ModelConfig& c) {
  std::vector<int64_t> units;
  units.push_back(c.vocab_size * c.dim);
  for (int64_t l = 0; l < c.n_layers; ++l) units.push_back(layer_parameter_count(c));
  units.push_back(c.dim + c.vocab_size * c.dim);
  return units;
}

int64_t shard_elements(int64_t n, int64_t world) { return CeilDiv(n, std::max<int64_t>(1, world)); }

std::vector<int64_t> projection_numels(const ModelConfig& c) {
  const int64_t C = c.dim, F = c.hidden_dim, Q = c.n_heads * c.HeadDim(), KV = c.n_kv_heads * c.HeadDim();
  return {Q * C, KV * C, KV * C, C * Q, F * C, F * C, C * F};
}

int64_t adapter_parameter_count(const ModelConfig& c, int64_t rank) {
  const int64_t C = c.dim, F = c.hidden_dim, Q = c.n_heads * c.HeadDim(), KV = c.n_kv_heads * c.HeadDim();
  // (in + out) of q, k, v, o, gate, up, down.
  const int64_t sum = (C + Q) + (C + KV) + (C + KV) + (Q + C) + (C + F) + (C + F) + (F + C);
  return c.n_layers * rank * sum;
}

int64_t adapter_a_parameter_count(const ModelConfig& c, int64_t rank) {
  const int64_t C = c.dim, F = c.hidden_dim, Q = c.n_heads * c.HeadDim();
  const int64_t ins = C + C + C + Q + C + C + F;  // the in-features of q, k, v, o, gate, up, down
  return c.n_layers * rank * ins;
}

int64_t nf4_bytes(int64_t n, bool double_quant) {
  const int64_t blocks = CeilDiv(n, kBlock);
  const int64_t codes = blocks * kBlock / 2;
  if (!double_quant) return codes + 4 * blocks;
  return codes + blocks + 4 * CeilDiv(blocks, kDqGroup) + 4;
}

int64_t nf4_layer_records(const ModelConfig& c, bool double_quant) {
  int64_t records = 0;
  for (int64_t n : projection_numels(c)) {
    const int64_t blocks = CeilDiv(n, kBlock);
    records += double_quant ? CeilDiv(blocks, kDqGroup) : blocks;
  }
  return records;
}

int64_t nf4_record_bytes(bool double_quant) { return double_quant ? kDqRecordBytes : kRecordBytes; }

int64_t nf4_layer_shard_bytes(const ModelConfig& c, bool double_quant, int64_t world) {
  return CeilDiv(nf4_layer_records(c, double_quant), std::max<int64_t>(1, world)) * nf4_record_bytes(double_quant);
}

int64_t layer_activation_bytes_per_token(const ModelConfig& c, int64_t e, int64_t seq_len, bool attention_probs_kept) {
  const int64_t C = c.dim, F = c.hidden_dim, NH = c.n_heads, HD = c.HeadDim(), f = F32Copy(e);
  // Per RMSNorm (rms_norm.h): its input x and output (kept by the projections after it),
  // e·C each, and the inverse RMS, 4 bytes a token.
  const int64_t norms = 2 * (2 * e * C + 4);
  const int64_t qkv = 3 * e * NH * HD;
  const int64_t attn_out = e * NH * HD;
  const int64_t core = attention_probs_kept ? 4 * NH * seq_len + f * e * NH * seq_len : e * NH * HD + 4 * NH;
  const int64_t mlp = 3 * e * F;  // gate, up (swiglu.h saves these two only), and down's input
  return norms + qkv + attn_out + core + mlp;
}

int64_t loss_bytes(const ModelConfig& c, int64_t micro_batch, int64_t seq_len, int64_t e) {
  const int64_t logits = micro_batch * seq_len * c.vocab_size;
  const int64_t chunk = std::min(logits, std::max(kLossChunk, c.vocab_size));
  // Float32 chunks: the widened copy and the softmax (the widening is no copy of float32 logits).
  return 2 * e * logits + (e == 4 ? 4 : 8) * chunk;
}

// nf4.cc's dequantization: the float32 result (4 bytes per weight); on CUDA
// also the int32 index of the byte table (2 per weight) and the copy in the
// compute dtype (≤ 2 per weight for bf16): 8 bytes per weight bound both.
int64_t dequantize_workspace_bytes(int64_t n) { return 8 * n; }
int64_t quantize_workspace_bytes(int64_t n) { return 17 * std::min(n, kQuantizeChunk); }

int64_t checkpointed_layers(int64_t n_layers, int64_t k) { return k > 0 ? CeilDiv(n_layers, k) : 0; }

std::string FormatBytes(int64_t bytes) {
  const double b = static_cast<double>(bytes);
  if (b >= 1e9) return fmt::format("{:.2f} GB", b / 1e9);
  if (b >= 1e6) return fmt::format("{:.1f} MB", b / 1e6);
  if (b >= 1e3) return fmt::format("{:.1f} kB", b / 1e3);
  return fmt::format("{} B", bytes);
}

std::string MemoryEstimate::Describe() const {
  std::string out = fmt::format("{} = {}", FormatBytes(peak_bytes), Terms(resident));
  if (!at_peak.empty()) out += fmt::format("; at the peak ({}): {}", peak_phase, Terms(at_peak));
  if (host_bytes > 0) out += fmt::format("; on the host: outer state {}", FormatBytes(host_bytes));
  return out;
}

MemoryEstimate estimate_training_memory(const TrainingMemoryShape& s) {
  const TrainingQuantities q = TrainingQuantitiesOf(s);
  Breakdown b = s.nf4 ? Nf4LoraTraining(s, q) : FullPrecisionTraining(s, q);
  int64_t host = 0;
  if (s.merges) {
    // The merged elements of a rank (outer_step.h): its float32 slices, or its trained adapters.
    int64_t merged = 0, largest = 0;
    if (s.nf4) {
      const int64_t adapters = adapter_parameter_count(s.config, s.lora_rank);
      merged = s.lora_freeze_a ? adapters - adapter_a_parameter_count(s.config, s.lora_rank) : adapters;
      largest = s.lora_rank * std::max({q.C, s.config.hidden_dim, s.config.n_heads * s.config.HeadDim()});
    } else {
      for (int64_t n : q.units) {
        merged += shard_elements(n, q.W);
        largest = std::max(largest, shard_elements(n, q.W));
      }
    }
    const bool pseudo = !(s.outer_lr == 1.0 && s.outer_momentum == 0.0) || s.merge_bytes != 4;
    std::vector<MemoryTerm> state;
    if (pseudo) state.push_back({"outer θ_global (float32)", 4 * merged});
    if (pseudo && s.outer_momentum > 0) state.push_back({"outer momentum (float32)", 4 * merged});
    if (s.outer_state_on_device) b.resident.insert(b.resident.end(), state.begin(), state.end());
    else host = Sum(state);
    b.phases.push_back({"merge (outer step)",
                        {{fmt::format("flat merge buffer ({} B/element)", s.merge_bytes), s.merge_bytes * merged},
                         {"one tensor's float32 temporaries", (pseudo ? 12 : 0) * largest}}});
  }
  MemoryEstimate out = Finish(std::move(b.resident), b.phases);
  out.host_bytes = host;
  return out;
}

int64_t inference_layer_bytes(const ModelConfig& c, int64_t e, bool nf4, bool double_quant) {
  if (!nf4) return e * layer_parameter_count(c);
  int64_t bytes = e * 2 * c.dim;  // the two RMSNorm gains
  for (int64_t n : projection_numels(c)) bytes += nf4_bytes(n, double_quant);
  return bytes;
}

LayerPlacement inference_placement(const ModelConfig& c, int64_t e, bool nf4, bool double_quant, int devices) {
  return place_layers_balanced(std::vector<int64_t>(static_cast<size_t>(c.n_layers), inference_layer_bytes(c, e, nf4, double_quant)),
                               std::max(1, devices), e * c.vocab_size * c.dim, e * (c.dim + c.vocab_size * c.dim));
}

int64_t decode_bucket_positions(int64_t prompt_tokens, const std::vector<int>& max_new_tokens, int64_t max_seq_len) {
  std::set<int64_t> capacities;
  for (int n : max_new_tokens) {
    // Every capacity a total of 1 + n to prompt_tokens + n positions rounds to (monotone in the total).
    const int64_t lo = 1 + n, hi = std::max<int64_t>(1, prompt_tokens) + n;
    for (int64_t t = lo;; t = std::min(hi, (t / kDecodeBucketPositions + 1) * kDecodeBucketPositions)) {
      capacities.insert(DecodeBucketCapacity(t, max_seq_len));
      if (t == hi) break;
    }
  }
  int64_t sum = 0;
  for (int64_t c : capacities) sum += c;
  return sum;
}

InferenceMemoryEstimate estimate_inference_memory(const InferenceMemoryShape& s) {
  const ModelConfig& c = s.config;
  const int64_t e = s.dtype_bytes, C = c.dim, F = c.hidden_dim, V = c.vocab_size, NH = c.n_heads, NKV = c.n_kv_heads,
                HD = c.HeadDim();
  const int64_t P = std::max<int64_t>(1, s.prompt_tokens), S = P + std::max<int64_t>(0, s.max_new_tokens);
  const int64_t layer = inference_layer_bytes(c, e, s.nf4, s.double_quant);
  const int64_t embed = e * V * C, head = e * (C + V * C);
  InferenceMemoryEstimate out;
  out.placement = inference_placement(c, e, s.nf4, s.double_quant, s.devices);
  std::vector<int64_t> pn = projection_numels(c);
  const int64_t largest_projection = *std::max_element(pn.begin(), pn.end());
  const int64_t kv_per_layer = 2 * NKV * HD * (s.kv_cache_positions > 0 ? s.kv_cache_positions : S) * e;
  const int64_t prefill = P * (e * (2 * C + (NH + 2 * NKV) * HD) + 4 * C + 4 * e * F) + 2 * e * NH * HD * S +
                          (s.attention_probs_kept ? 4 * NH * P * S : 0);
  for (int d = 0; d < out.placement.devices; ++d) {
    const int64_t layers = out.placement.device_layers[static_cast<size_t>(d)];
    std::vector<MemoryTerm> resident;
    resident.push_back({s.nf4 ? "weights (NF4 projections, norms)" : "weights", layers * layer});
    if (d == out.placement.embed_device) resident.push_back({"embedding", embed});
    if (d == out.placement.head_device) resident.push_back({"final norm + lm_head", head});
    resident.push_back({"KV cache", layers * kv_per_layer});
    std::vector<Phase> phases;
    {
      Phase p{"prefill of the prompt", {}};
      if (layers > 0) p.terms.push_back({"one layer's activations", prefill});
      if (s.nf4 && layers > 0) p.terms.push_back({"one projection dequantized", dequantize_workspace_bytes(largest_projection)});
      if (d == out.placement.head_device) p.terms.push_back({"prompt logits", P * V * e});
      phases.push_back(std::move(p));
    }
    if (s.nf4 && layers > 0) {
      // Loading (model_fill_nf4): each projection is read in the compute dtype, quantized and
      // freed before the next; the device never holds more than one in full precision.
      Phase p{"load (one projection at a time)", {}};
      p.terms.push_back({"one projection in the compute dtype", e * largest_projection});
      p.terms.push_back({"quantization workspace", quantize_workspace_bytes(largest_projection)});
      phases.push_back(std::move(p));
    }
    MemoryEstimate m = Finish(std::move(resident), phases);
    if (m.peak_bytes > out.peak_bytes) {
      out.peak_bytes = m.peak_bytes;
      out.peak_device = d;
    }
    out.devices.push_back(std::move(m));
  }
  return out;
}

}  // namespace native
}  // namespace protocol
