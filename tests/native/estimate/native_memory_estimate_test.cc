// The memory estimator (memory_estimate.h): each term's exact value for small
// configurations, written out from the formulas in the header, and the pieces
// checked against the code they model (parameter counts, NF4 bytes, NF4 shard
// bytes, LoRA parameter counts, the bytes a real 4-bit model holds).
#include "native_test_support.h"

#include "backends/native/quant/lora.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/model/decode_bucket_capacity.h"
#include "backends/native/model/model.h"
#include "backends/native/distributed/nf4_shard.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/training/chunked_loss.h"
#include "backends/native/training/train.h"

namespace protocol {
namespace native {
namespace {

int64_t Term(const std::vector<MemoryTerm>& terms, const std::string& name) {
  for (const MemoryTerm& t : terms)
    if (t.name == name) return t.bytes;
  FAIL("no term '" << name << "'");
  return -1;
}

ModelConfig Tiny() { return *PresetConfig("tiny"); }  // C 192, L 4, NH 6, NKV 2, F 512, V 1024, HD 32

// The tiny model served in float32 on `devices`: a prompt of 10 tokens, 30 new.
InferenceMemoryShape TinyInference(int devices) {
  InferenceMemoryShape s;
  s.config = Tiny();
  s.devices = devices;
  s.dtype_bytes = 4;
  s.prompt_tokens = 10;
  s.max_new_tokens = 30;
  return s;
}

}  // namespace

TEST_CASE("memory estimate: parameter counts per unit match the model") {
  for (const std::string& name : PresetNames()) {
    CAPTURE(name);
    const ModelConfig c = *PresetConfig(name);
    const std::vector<int64_t> units = unit_parameter_counts(c);
    REQUIRE(units.size() == static_cast<size_t>(c.n_layers + 2));
    int64_t total = 0;
    for (int64_t n : units) total += n;
    CHECK(total == c.ParameterCount());
    CHECK(adapter_parameter_count(c, 8) == lora_parameter_count(c, 8));
    int64_t projections = 0;
    for (int64_t n : projection_numels(c)) projections += n;
    CHECK(projections + 2 * c.dim == layer_parameter_count(c));
  }
  const ModelConfig t = Tiny();
  CHECK(layer_parameter_count(t) == 393600);  // 192·192·2 + 2·192·64 + 3·192·512 + 384
  CHECK(unit_parameter_counts(t).front() == 196608);
  CHECK(unit_parameter_counts(t).back() == 196800);
  // The model as allocated holds exactly these parameters.
  Model m = model_create(t, at::TensorOptions().dtype(at::kFloat));
  CHECK(model_parameter_count(m) == t.ParameterCount());
  // A's half: L · r · Σ in (q, k, v, o, gate, up, down) = 4 · 8 · (192·6 + 512).
  CHECK(adapter_a_parameter_count(t, 8) == 4 * 8 * (192 * 6 + 512));
  LoraAdapters lora = lora_create(t, 8, 16, 1);
  int64_t a_params = 0;
  for (auto& layer : lora.layers)
    for (LoraAdapter& ad : layer) a_params += ad.a.numel();
  CHECK(a_params == adapter_a_parameter_count(t, 8));
}

TEST_CASE("memory estimate: NF4 bytes and shard bytes are those of nf4.h / nf4_shard.h") {
  for (const char* name : {"tiny", "llama2-7b", "llama2-70b"}) {
    const ModelConfig c = *PresetConfig(name);
    for (bool dq : {false, true}) {
      CAPTURE(name);
      CAPTURE(dq);
      for (int64_t n : projection_numels(c)) CHECK(nf4_bytes(n, dq) == nf4_storage_bytes(n, dq));
      const Nf4UnitLayout layout = nf4_layer_layout(c, dq);
      CHECK(nf4_layer_records(c, dq) == layout.total_records);
      for (int64_t w : {1, 2, 3, 4, 8, 16}) CHECK(nf4_layer_shard_bytes(c, dq, w) == nf4_shard_bytes(layout, static_cast<int>(w)));
    }
  }
  // Llama-2-70B, one decoder layer at W = 8 (nf4_shard.h's figures).
  const ModelConfig big = *PresetConfig("llama2-70b");
  CHECK(nf4_layer_shard_bytes(big, false, 8) == 60162048);
  CHECK(nf4_layer_shard_bytes(big, true, 8) == 55200768);
  // The bytes a real 4-bit model holds.
  const ModelConfig t = Tiny();
  Model m = model_create(t, at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 3);
  model_quantize_nf4(m, false);
  int64_t per_layer = 0;
  for (int64_t n : projection_numels(t)) per_layer += nf4_bytes(n, false);
  CHECK(nf4_weight_bytes(m) == t.n_layers * per_layer);
}

TEST_CASE("memory estimate: activation, loss and workspace terms") {
  const ModelConfig t = Tiny();
  // e = 4 (CPU), T = 16, probabilities kept:
  //   norms 2·(2·4·192 + 4) = 3080, q k v 3·4·192 = 2304, attention output 768,
  //   probabilities 4·6·16 = 384, MLP (gate, up, down's input) 3·4·512 = 6144.
  CHECK(layer_activation_bytes_per_token(t, 4, 16, true) == 3080 + 2304 + 768 + 384 + 6144);
  // e = 2 (CUDA, fused attention): norms 2·(2·2·192 + 4) = 1544, q k v 1152, output 384,
  //   kernel e·NH·HD + 4·NH = 384 + 24, MLP 3·2·512 = 3072.
  CHECK(layer_activation_bytes_per_token(t, 2, 16, false) == 1544 + 1152 + 384 + 408 + 3072);
  // e = 2 on the math path: probabilities in float32 and their bf16 copy, 4·6·16 + 2·6·16.
  CHECK(layer_activation_bytes_per_token(t, 2, 16, true) == 1544 + 1152 + 384 + 384 + 192 + 3072);
  // The logits kept and their gradient (2·e per logit) and two float32 chunks
  // of chunked_loss.h's kLossChunkElements, or of all 2·16·1024 logits when fewer
  // (one chunk for float32 logits, whose widening is no copy).
  CHECK(loss_bytes(t, 2, 16, 4) == 2 * 16 * 1024 * (8 + 4));
  CHECK(loss_bytes(t, 2, 16, 2) == 2 * 16 * 1024 * (4 + 8));
  ModelConfig wide = t;
  wide.vocab_size = 32000;  // llama-1b's micro-batch: 4 x 2048 tokens
  CHECK(loss_bytes(wide, 4, 2048, 2) == 4 * 2048 * int64_t{32000} * 4 + 8 * kLossChunkElements);
  CHECK(dequantize_workspace_bytes(1000) == 8000);
  CHECK(quantize_workspace_bytes(1000) == 17000);
  // nf4_quantize works on kNf4QuantizeChunkBlocks blocks at a time.
  CHECK(quantize_workspace_bytes(28672LL * 8192) == 17 * kNf4QuantizeChunkBlocks * kNf4BlockSize);
  CHECK(checkpointed_layers(80, 1) == 80);
  CHECK(checkpointed_layers(80, 3) == 27);  // layers 0, 3, ..., 78
  CHECK(checkpointed_layers(80, 0) == 0);
  CHECK(shard_elements(10, 3) == 4);
}

TEST_CASE("memory estimate: FSDP FULL_SHARD training of the tiny preset, W = 2, every term") {
  TrainingMemoryShape s;
  s.config = Tiny();
  s.world = 2;
  s.sharded = true;
  s.prefetch = false;  // the synchronous order first; prefetch's terms at the end
  s.micro_batch = 2;
  s.seq_len = 16;
  s.checkpoint_every = 1;
  s.dtype_bytes = 4;
  s.attention_probs_kept = true;
  MemoryEstimate m = estimate_training_memory(s);
  // Slices: embedding 98304, layers 196800 each, head 98400: Σ S = 983904.
  CHECK(Term(m.resident, "float32 master slice") == 4 * 983904);
  CHECK(Term(m.resident, "AdamW m, v") == 8 * 983904);
  // The peak is the backward of layer 0: every other unit's gradient slice is formed
  // (head 4·98400 + 3 layers 4·196800), layer 0's checkpointed input is kept
  // (4·192·32), the gathered layer and its gradients (4·393600 + 4·393600), and the
  // layer's activations recomputed (12680 · 32).
  CHECK(m.peak_phase == "backward of decoder layer 0");
  CHECK(Term(m.at_peak, "gradients") == 4 * 98400 + 3 * 4 * 196800);
  CHECK(Term(m.at_peak, "activations") == 4 * 192 * 32);
  CHECK(Term(m.at_peak, "gathered layer + its gradients") == 8 * 393600);
  CHECK(Term(m.at_peak, "one layer's activations") == 12680 * 32);
  CHECK(m.peak_bytes == 12 * 983904 + 2755200 + 24576 + 3148800 + 405760);

  // No checkpointing: every layer's graph is kept (12680 bytes a token). The head's
  // backward holds all four graphs, the gathered head (8·196800) and the loss:
  // 1623040 + 1574400 + 393216 = 3590656; layer 0's backward holds the formed gradients
  // (2755200), its own graph and its gradients' workspace (2 · 405760) and the gathered
  // layer (3148800) = 6715520: the peak.
  s.checkpoint_every = 0;
  MemoryEstimate kept = estimate_training_memory(s);
  CHECK(kept.peak_phase == "backward of decoder layer 0");
  CHECK(Term(kept.at_peak, "activations") == 12680 * 32);
  CHECK(Term(kept.at_peak, "one layer's activations") == 12680 * 32);
  CHECK(kept.peak_bytes == 12 * 983904 + 2755200 + 2 * 405760 + 3148800);
  // With a vocabulary of 8192 the embedding and the head are 1572864 and 1573056
  // elements: the embedding's backward (every other gradient slice, 3146112 + 4·787200
  // bytes, and its gradients with their flat float32 copy, 8·1572864: it is not
  // gathered, its backward reads no weight) is the peak ...
  TrainingMemoryShape wide_vocab = s;
  wide_vocab.config.vocab_size = 8192;
  MemoryEstimate embed = estimate_training_memory(wide_vocab);
  CHECK(embed.peak_phase == "backward of the embedding");
  CHECK(Term(embed.at_peak, "gradients") == 4 * 786528 + 4 * 4 * 196800);
  CHECK(Term(embed.at_peak, "embedding gradients (no gather: its backward reads no weight)") == 8 * 1572864);
  // ... and with 4 times the tokens, the head's: its loss, four graphs, the gathered head.
  wide_vocab.micro_batch = 8;
  MemoryEstimate wide = estimate_training_memory(wide_vocab);
  CHECK(wide.peak_phase == "backward of the head (logits, loss)");
  CHECK(Term(wide.at_peak, "activations") == 4 * 12680 * 128);
  CHECK(Term(wide.at_peak, "gathered head + its gradients") == 8 * 1573056);
  // The logits and their gradient, 2·4 bytes each, and the float32 chunks (all 8·16·8192 in one).
  CHECK(Term(wide.at_peak, "logits and cross-entropy") == 8 * 16 * 8192 * (8 + 4));

  // W = 1, the one-process path on CUDA (bf16 weights, float32 master, bf16 gradients).
  TrainingMemoryShape one = s;
  one.sharded = false;
  one.world = 1;
  one.dtype_bytes = 2;
  one.attention_probs_kept = false;
  one.checkpoint_every = 1;
  MemoryEstimate o = estimate_training_memory(one);
  const int64_t N = Tiny().ParameterCount();
  CHECK(Term(o.resident, "weights (2 B/param)") == 2 * N);
  CHECK(Term(o.resident, "float32 master copy") == 4 * N);
  CHECK(Term(o.resident, "AdamW m, v") == 8 * N);
  // Peak: the optimizer step with every bf16 gradient and AdamW's float32 copies of
  // them for its largest run (the whole model, N < 2^24 elements; √v̂ + ε is in the
  // resident workspace), against layer 0's backward (most gradients, small activations).
  CHECK(o.peak_phase == "optimizer step");
  CHECK(Term(o.at_peak, "gradients") == 2 * N);
  CHECK(Term(o.at_peak, "AdamW temporaries") == 4 * N);
  CHECK(Term(o.resident, "AdamW workspace (√v̂ + ε of its largest run)") == 4 * N);
  // In float32 no gradient copy: the step holds the gradients only.
  one.dtype_bytes = 4;
  CHECK(Term(estimate_training_memory(one).phases, "optimizer step") == 4 * N);
  one.dtype_bytes = 2;
  {
    // A model larger than one run whose tensors are all smaller than it (layers-100m:
    // V·C 786,432, N 100.7 M): the workspace is one run of train.h's kAdamwChunkElements.
    TrainingMemoryShape big = one;
    big.config = *PresetConfig("layers-100m");
    CHECK(Term(estimate_training_memory(big).resident, "AdamW workspace (√v̂ + ε of its largest run)") ==
          4 * kAdamwChunkElements);
  }

  // Prefetch (fsdp_schedule.h): a layer's backward also holds the next unit
  // gathered (layer l−1: 4·393600; nothing for the embedding) and the previous
  // unit's float32 flat gradient in flight (layer l+1: 4·393600; the head:
  // 4·196800). Layer 1 becomes the peak: formed gradients 393600 + 2·787200,
  // two checkpointed inputs 2·24576, the gathered layer and its gradients
  // 3148800, its activations 405760, plus 1574400 + 1574400.
  s.checkpoint_every = 1;
  s.prefetch = true;
  MemoryEstimate ahead = estimate_training_memory(s);
  CHECK(ahead.peak_phase == "backward of decoder layer 1");
  CHECK(Term(ahead.at_peak, "next unit prefetched") == 4 * 393600);
  CHECK(Term(ahead.at_peak, "previous unit's gradient in flight") == 4 * 393600);
  CHECK(ahead.peak_bytes == 12 * 983904 + 393600 + 2 * 787200 + 2 * 24576 + 3148800 + 405760 + 2 * 1574400);
  // A bf16 reduction halves the gradient in flight.
  s.reduce_bytes = 2;
  CHECK(Term(estimate_training_memory(s).at_peak, "previous unit's gradient in flight") == 2 * 393600);
}

TEST_CASE("memory estimate: 4-bit QLoRA training, sharded and in one process") {
  TrainingMemoryShape s;
  s.config = Tiny();
  s.world = 2;
  s.sharded = true;
  s.micro_batch = 8;  // enough tokens that a layer's backward outweighs the load
  s.seq_len = 16;
  s.dtype_bytes = 4;
  s.nf4 = true;
  s.lora_rank = 8;
  s.prefetch = false;  // prefetch's terms at the end
  MemoryEstimate m = estimate_training_memory(s);
  const ModelConfig t = Tiny();
  CHECK(Term(m.resident, "NF4 projections (1/2 of the records)") == 4 * nf4_layer_shard_bytes(t, false, 2));
  // Frozen in float32: ⌈196608/2⌉ + 4·⌈384/2⌉ + ⌈196800/2⌉ elements.
  CHECK(Term(m.resident, "frozen embedding, norms, lm_head (slice)") == 4 * (98304 + 4 * 192 + 98400));
  const int64_t adapters = lora_parameter_count(t, 8);
  CHECK(Term(m.resident, "LoRA adapters, their gradients, AdamW m, v") == 16 * adapters);
  s.lora_freeze_a = true;
  const int64_t a_part = adapter_a_parameter_count(t, 8);
  CHECK(Term(estimate_training_memory(s).resident, "LoRA adapters, their gradients, AdamW m, v") ==
        4 * adapters + 12 * (adapters - a_part));
  // The peak is the last layer's backward: every activation kept (8·16 checkpointed inputs
  // of 4·192 bytes a layer), the gathered NF4 layer (all 6144 records of 36 bytes), the
  // largest projection (gate/up/down, 512·192) dequantized, one layer's activations.
  s.lora_freeze_a = false;
  MemoryEstimate peak = estimate_training_memory(s);
  CHECK(peak.peak_phase == "backward of decoder layer 3");
  CHECK(Term(peak.at_peak, "activations") == 4 * 4 * 192 * 8 * 16);
  CHECK(nf4_layer_records(t, false) == 6144);
  CHECK(Term(peak.at_peak, "gathered NF4 layer") == 6144 * 36);
  CHECK(Term(peak.at_peak, "one projection dequantized") == 8 * 512 * 192);
  CHECK(Term(peak.at_peak, "one layer's activations") == 12680 * 8 * 16);
  // With prefetch the next layer's records are gathered too, and the previous
  // layer's adapter gradients (a quarter of the adapters, float32) in flight.
  s.prefetch = true;
  MemoryEstimate ahead = estimate_training_memory(s);
  CHECK(ahead.peak_phase == "backward of decoder layer 3");
  CHECK(Term(ahead.at_peak, "next NF4 layer prefetched") == 6144 * 36);
  CHECK(Term(ahead.at_peak, "previous layer's adapter gradients in flight") == 4 * adapters / 4);
  CHECK(ahead.peak_bytes == peak.peak_bytes + 6144 * 36 + adapters);
  // One process: the NF4 storage of every projection.
  s.sharded = false;
  s.world = 1;
  s.seq_len = 16;
  MemoryEstimate one = estimate_training_memory(s);
  CHECK(Term(one.resident, "NF4 projections") == nf4_expected_weight_bytes(t, false));
  CHECK(Term(one.resident, "frozen embedding, norms, lm_head") == 4 * (2 * 1024 * 192 + 192 + 2 * 4 * 192));
}

TEST_CASE("memory estimate: a 4-bit model loads one projection at a time, not the whole model") {
  // One sequence: the load (the largest projection, 512·192 weights, in float32
  // and its quantization workspace of 17 bytes per weight) is the peak.
  const ModelConfig t = Tiny();
  const int64_t largest = 512 * 192;
  TrainingMemoryShape s;
  s.config = t;
  s.micro_batch = 1;
  s.seq_len = 16;
  s.dtype_bytes = 4;
  s.nf4 = true;
  s.lora_rank = 8;
  // One process: on top of the NF4 projections made so far, the frozen rest and the adapters.
  s.sharded = false;
  s.world = 1;
  MemoryEstimate one = estimate_training_memory(s);
  CHECK(one.peak_phase == "load (one projection at a time)");
  REQUIRE(one.at_peak.size() == 2);
  CHECK(Term(one.at_peak, "one projection in the compute dtype") == 4 * largest);
  CHECK(Term(one.at_peak, "quantization workspace") == 17 * largest);
  // The adapters with gradients and AdamW m, v (16 B each) and AdamW's workspace (4 B each: one run).
  const int64_t resident = nf4_expected_weight_bytes(t, false) + 4 * (2 * 1024 * 192 + 192 + 2 * 4 * 192) +
                           20 * lora_parameter_count(t, 8);
  CHECK(one.peak_bytes == resident + 21 * largest);
  // Sharded over 2 ranks: also the layer's NF4 records (6144 of 36 bytes) before they are cut.
  s.sharded = true;
  s.world = 2;
  MemoryEstimate sharded = estimate_training_memory(s);
  CHECK(sharded.peak_phase == "load (one projection at a time)");
  CHECK(Term(sharded.at_peak, "the layer's NF4 before sharding") == 6144 * 36);
  CHECK(sharded.peak_bytes == 4 * nf4_layer_shard_bytes(t, false, 2) + 4 * (98304 + 4 * 192 + 98400) +
                                  20 * lora_parameter_count(t, 8) + 21 * largest + 6144 * 36);
  // bf16 on a GPU (e = 2): 2 + 17 bytes per weight of the largest projection.
  s.dtype_bytes = 2;
  s.sharded = false;
  s.world = 1;
  MemoryEstimate bf16 = estimate_training_memory(s);
  CHECK(bf16.peak_phase == "load (one projection at a time)");
  CHECK(Term(bf16.at_peak, "one projection in the compute dtype") == 2 * largest);
}

TEST_CASE("memory estimate: Llama-2-70B 4-bit inference on replicas of 2 GPUs loads in about its NF4 bytes") {
  // plans/llama70b.yaml's 2.2.1.3: bf16, 40 layers a GPU, the prompt bound 64 tokens, 400 new.
  const ModelConfig c = *PresetConfig("llama2-70b");  // C 8192, L 80, NH 64, NKV 8, F 28672, V 32000
  InferenceMemoryShape s;
  s.config = c;
  s.devices = 2;
  s.dtype_bytes = 2;
  s.attention_probs_kept = false;
  s.nf4 = true;
  s.prompt_tokens = 64;
  s.max_new_tokens = 400;
  InferenceMemoryEstimate m = estimate_inference_memory(s);
  CHECK(m.placement.device_layers == std::vector<int>{40, 40});
  REQUIRE(m.peak_device == 1);
  const MemoryEstimate& d = m.devices[1];
  // A layer: NF4 of its seven projections (4·8192·8192·... written out: q, o 8192², k, v
  // 1024·8192, gate, up, down 28672·8192; 36 bytes per 64 weights), its two bf16 norms.
  const int64_t weights = 2 * 8192 * 8192 + 2 * 1024 * 8192 + 3 * 28672 * 8192;
  const int64_t layer = weights / 64 * 36 + 2 * 2 * 8192;
  const int64_t head = 2 * (8192 + 32000 * 8192);
  const int64_t kv = 40 * 2 * 8 * 128 * (64 + 400) * 2;
  const int64_t largest = 28672 * 8192;
  // The load: one projection in bf16 and the workspace of one chunk of 2^20 weights
  // (nf4_quantize); no longer the peak, which is the prefill with one projection
  // dequantized (8 bytes per weight).
  const int64_t chunk = kNf4QuantizeChunkBlocks * kNf4BlockSize;
  CHECK(Term(d.phases, "load (one projection at a time)") == 2 * largest + 17 * chunk);
  CHECK(d.peak_phase == "prefill of the prompt");
  CHECK(Term(d.at_peak, "one projection dequantized") == 8 * largest);
  // 21.77 GB: the NF4 weights (19.85 GB with the head and the KV cache) and the prefill,
  // where loading the 40 layers in bf16 first took 73.05 GB.
  CHECK(FormatBytes(m.peak_bytes) == "21.77 GB");
  // Less than three bf16 layers on top of the NF4 weights (the whole-model load held all 40).
  CHECK(m.peak_bytes - (40 * layer + head + kv) < 3 * 2 * (weights + 2 * 8192));
}

TEST_CASE("memory estimate: decode buckets kept between requests hold the sum of their capacities") {
  // Capacities: the total rounded up to a multiple of 256, within the context, never below the total.
  CHECK(DecodeBucketCapacity(1, 4096) == 256);
  CHECK(DecodeBucketCapacity(256, 4096) == 256);
  CHECK(DecodeBucketCapacity(257, 4096) == 512);
  CHECK(DecodeBucketCapacity(300, 320) == 320);
  CHECK(DecodeBucketCapacity(330, 320) == 330);  // past the context: the generation refuses it
  // The methodology's schedule 100, 110, ..., 400 after a prompt of at most 20 tokens: totals
  // 101 to 420, buckets of 256 and 512.
  std::vector<int> schedule;
  for (int n = 100; n <= 400; n += 10) schedule.push_back(n);
  CHECK(decode_bucket_positions(20, schedule, 4096) == 256 + 512);
  // Every bucket a prompt of 1 to 200 tokens can reach: totals 101 to 600 (256, 512, 768).
  CHECK(decode_bucket_positions(200, schedule, 4096) == 256 + 512 + 768);
  CHECK(decode_bucket_positions(200, schedule, 700) == 256 + 512 + 700);  // the last within the context
  CHECK(decode_bucket_positions(5, {10}, 4096) == 256);
  InferenceMemoryShape s = TinyInference(1);
  s.kv_cache_positions = 256;
  // 2 · NKV · HD · 256 · e per layer, 4 layers on the one device.
  CHECK(Term(estimate_inference_memory(s).devices[0].resident, "KV cache") == 4 * 2 * 2 * 32 * 256 * 4);
}

TEST_CASE("memory estimate: inference places the weights and the KV cache per device") {
  InferenceMemoryShape s = TinyInference(2);
  InferenceMemoryEstimate est = estimate_inference_memory(s);
  REQUIRE(est.devices.size() == 2);
  CHECK(est.placement.device_layers == std::vector<int>{2, 2});
  const int64_t layer = 4 * 393600;
  CHECK(inference_layer_bytes(Tiny(), 4, false, false) == layer);
  CHECK(Term(est.devices[0].resident, "weights") == 2 * layer);
  CHECK(Term(est.devices[0].resident, "embedding") == 4 * 1024 * 192);
  CHECK(Term(est.devices[1].resident, "final norm + lm_head") == 4 * (192 + 1024 * 192));
  // KV cache: 2 · NKV · HD · (prompt + max_new) · e per layer = 2·2·32·40·4.
  CHECK(Term(est.devices[0].resident, "KV cache") == 2 * 2 * 2 * 32 * 40 * 4);
  // The prefill through one layer: 10·(4·(2·192 + (6 + 4)·32) + 4·192 + 4·4·512)
  // + 2·4·6·32·40 (k, v repeated over 40 positions) + 4·6·10·40 (probabilities).
  CHECK(Term(est.devices[0].at_peak, "one layer's activations") ==
        10 * (4 * (2 * 192 + 10 * 32) + 4 * 192 + 16 * 512) + 2 * 4 * 6 * 32 * 40 + 4 * 6 * 10 * 40);
  CHECK(Term(est.devices[1].at_peak, "prompt logits") == 10 * 1024 * 4);
  CHECK(est.peak_bytes == std::max(est.devices[0].peak_bytes, est.devices[1].peak_bytes));
  // 4-bit: NF4 projections + the two norms per layer; the load phase holds one projection
  // in float32 (the largest, 512·192) and its quantization workspace, never a whole layer.
  s.nf4 = true;
  InferenceMemoryEstimate q = estimate_inference_memory(s);
  const int64_t nf4_layer = inference_layer_bytes(Tiny(), 4, true, false);
  CHECK(nf4_layer == nf4_expected_weight_bytes(Tiny(), false) / 4 + 4 * 2 * 192);
  CHECK(q.devices[0].peak_phase == "load (one projection at a time)");
  REQUIRE(q.devices[0].at_peak.size() == 2);
  CHECK(Term(q.devices[0].at_peak, "one projection in the compute dtype") == 4 * 512 * 192);
  CHECK(Term(q.devices[0].at_peak, "quantization workspace") == 17 * 512 * 192);
  REQUIRE(q.placement.embed_device == 0);
  const int64_t layers0 = q.placement.device_layers[0];
  CHECK(q.devices[0].peak_bytes ==
        layers0 * (nf4_layer + 2 * 2 * 32 * 40 * 4) + 4 * 1024 * 192 + 21 * 512 * 192);
}

}  // namespace native
}  // namespace protocol

namespace protocol {
namespace native {

TEST_CASE("memory estimate: a share merge's outer state on the device or the host, and its flat buffer") {
  // Tiny over W = 2: P_m = Σ ⌈n_u/2⌉ = 98304 + 4·196800 + 98400 = 983904, the
  // largest merged tensor a layer's slice ⌈393600/2⌉ = 196800.
  TrainingMemoryShape s;
  s.config = Tiny();
  s.world = 2;
  s.merges = true;
  s.merge_bytes = 4;
  const int64_t P = 983904, largest = 196800;
  SUBCASE("plain float32 averaging: no state, the flat buffer only") {
    MemoryEstimate m = estimate_training_memory(s);
    CHECK(m.host_bytes == 0);
    for (const MemoryTerm& t : m.resident) CHECK(t.name.find("outer") == std::string::npos);
    CHECK(m.Describe().find("on the host") == std::string::npos);
  }
  SUBCASE("DiLoCo's settings: θ_global and the momentum, 4·P_m each") {
    s.outer_lr = 0.7;
    s.outer_momentum = 0.9;
    const MemoryEstimate host = estimate_training_memory(s);
    CHECK(host.host_bytes == 8 * P);
    CHECK(host.Describe().find("; on the host: outer state 7.9 MB") != std::string::npos);
    s.outer_state_on_device = true;
    const MemoryEstimate device = estimate_training_memory(s);
    CHECK(device.host_bytes == 0);
    CHECK(Term(device.resident, "outer θ_global (float32)") == 4 * P);
    CHECK(Term(device.resident, "outer momentum (float32)") == 4 * P);
    CHECK(device.peak_bytes == host.peak_bytes + 8 * P);  // the peak phase is the same; the state is on top
  }
  SUBCASE("a bfloat16 merge of plain averaging sends the pseudo-gradient: θ_global kept, no momentum") {
    s.merge_bytes = 2;
    s.outer_state_on_device = true;
    s.seq_len = 4;  // small activations: the merge becomes the peak phase
    s.micro_batch = 1;
    const MemoryEstimate m = estimate_training_memory(s);
    CHECK(Term(m.resident, "outer θ_global (float32)") == 4 * P);
    bool momentum = false;
    for (const MemoryTerm& t : m.resident) momentum = momentum || t.name == "outer momentum (float32)";
    CHECK_FALSE(momentum);
  }
  SUBCASE("the merge phase: the flat buffer in the merge dtype and one tensor's temporaries") {
    s.outer_lr = 0.7;
    for (int64_t m : {4, 2}) {
      s.merge_bytes = m;
      const MemoryEstimate e = estimate_training_memory(s);
      CHECK(Term(e.phases, "merge (outer step)") == m * P + 12 * largest);
    }
    s.outer_lr = 1.0;
    s.merge_bytes = 4;  // plain float32 averaging: the buffer only
    CHECK(Term(estimate_training_memory(s).phases, "merge (outer step)") == 4 * P);
  }
}

}  // namespace native
}  // namespace protocol
