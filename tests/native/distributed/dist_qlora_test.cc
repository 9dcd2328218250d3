// Distributed 4-bit training (fsdp_qlora.h): the frozen NF4 base sharded by
// whole blocks across the ranks of a group, LoRA adapters replicated with
// their gradients summed over the group; the share protocol's groups each
// training their own adapters and merged exactly.
//   - in one process, W ranks on threads over Gloo: per-rank shard bytes by
//     formula, gathered codes bit-identical to one-process quantization, the
//     same logits;
//   - through `protocol worker` ranks: QLoRA on 2 and 4 ranks equals one
//     process (adapters within 1e-5), bytes by formula;
//   - share with 4-bit groups: the merged adapter is the stack of the groups'
//     adapters (ΔW = the mean of the groups' ΔW within 1e-6), or with A frozen
//     the average of B; bytes between groups by formula.
#include "dist_test_support.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <c10/core/GradMode.h>

#include "backends/native/fsdp_backend.h"
#include "backends/native/distributed/fsdp_qlora.h"
#include "backends/native/estimate/traffic.h"
#include "backends/native/quant/lora.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/distributed/nf4_shard.h"
#include "backends/native/quant/quantized_model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/share_backend.h"
#include "backends/native/platform/torch_compat.h"
#include "runner/base/text.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using namespace dist_test;
using namespace native;

// A tiny Llama with real (seeded, then saved) weights and a SentencePiece tokenizer.
struct Fixture {
  fs::path root;
  ModelConfig config;
  Fixture() {
    root = fs::temp_directory_path() / ("protocol_dist_qlora_" + std::to_string(getpid()));
    fs::remove_all(root);
    WriteCorpusAndTokenizer(root);
    config.dim = 64;
    config.n_layers = 2;
    config.n_heads = 4;
    config.n_kv_heads = 2;
    config.hidden_dim = 128;
    config.vocab_size = 64;
    config.max_seq_len = 128;
    Model m = model_create(config, at::TensorOptions().dtype(at::kFloat));
    model_init_random(m, 7);
    REQUIRE(model_save(m, (root / "model").string()).ok());
  }
  ~Fixture() { fs::remove_all(root); }

  Model LoadBase() const {
    auto m = model_load_dir((root / "model").string(), at::TensorOptions().dtype(at::kFloat));
    REQUIRE(m.ok());
    return std::move(*m);
  }

  Plan MakePlan(bool double_quant) const {
    Plan plan;
    plan.name = "dist-qlora";
    plan.file = (root / "plan.yaml").string();
    ModelSpec m;
    m.name = "mini";
    m.path = (root / "model").string();
    m.quantization = Quantization::kNf4;
    m.double_quant = double_quant;
    plan.models["mini"] = m;
    plan.datasets["corpus"] = DatasetSpec{"corpus", "text", (root / "corpus.txt").string(), {}, {}};
    return plan;
  }
};

// QLoRA continued pretraining of the saved weights: the shared mini case with LoRA rank 4.
CaseSpec Training(const std::string& backend, int64_t steps) {
  CaseSpec spec = MiniTraining(backend, steps);
  spec.id = "q.1";
  spec.training.lora_rank = 4;
  spec.training.lora_alpha = 8;
  return spec;
}

LoraAdapters LoadAdapters(const ModelConfig& c, const fs::path& dir) {
  auto a = lora_load(dir.string(), c);
  INFO(a.status().message());
  REQUIRE(a.ok());
  return std::move(*a);
}

double MaxAdapterDiff(LoraAdapters& a, LoraAdapters& b) {
  auto pa = lora_parameters(a), pb = lora_parameters(b);
  REQUIRE(pa.size() == pb.size());
  double d = 0;
  for (size_t i = 0; i < pa.size(); ++i) d = std::max(d, (*pa[i].tensor - *pb[i].tensor).abs().max().item<double>());
  return d;
}

// What one in-process rank saw.
struct RankResult {
  std::string error;
  int64_t layer_shard_bytes = 0, base_bytes = 0, bytes = 0;
  size_t largest_layer_fill = 0;  // the most tensors of a decoder layer one fill call set
  std::vector<std::vector<Nf4Tensor>> layers;
  at::Tensor logits;
};

}  // namespace

TEST_CASE("fsdp qlora: per-rank NF4 bytes by formula; gathered codes bit-identical to one-process quantization and views "
          "of the gathered buffer; same logits; a layer read one tensor at a time") {
  Fixture fx;
  const at::Tensor tokens = at::randint(0, fx.config.vocab_size, {2, 12}, at::TensorOptions().dtype(at::kLong));
  for (bool dq : {false, true}) {
    for (int W : {2, 3}) {
      CAPTURE(dq);
      CAPTURE(W);
      // One process: the saved weights quantized as the one-process backend does, LoRA B = 0.
      Model one = fx.LoadBase();
      model_quantize_nf4(one, dq);
      auto lora = std::make_shared<LoraAdapters>(lora_create(fx.config, 4, 8, 3));
      REQUIRE(model_attach_lora(one, lora).ok());
      at::Tensor want;
      {
        c10::NoGradGuard no_grad;
        want = model_forward(one, tokens, nullptr);
      }
      // W ranks on threads, each with its own Gloo group.
      auto stores = testing::LocalStores(W);
      std::vector<RankResult> results(static_cast<size_t>(W));
      std::vector<std::thread> threads;
      for (int r = 0; r < W; ++r) {
        threads.emplace_back([&, r] {
          RankResult& out = results[static_cast<size_t>(r)];
          try {
            auto group = compat::CommGroupCreate(stores[static_cast<size_t>(r)], r, W, false, 30000);
            auto reader = WeightsReader::Open((fx.root / "model").string());
            if (!reader.ok()) throw std::runtime_error(reader.status().message());
            auto fill = [&](const std::vector<NamedParameter>& unit) -> Status {
              for (const NamedParameter& p : unit) {
                if (p.name.find(".layers.") != std::string::npos)
                  out.largest_layer_fill = std::max(out.largest_layer_fill, unit.size());
                if (Status s = reader->Read(p); !s.ok()) return s;
              }
              return Status::Ok();
            };
            Communicator comm(group);
            FsdpSetup setup;
            setup.shard = &comm;
            auto sq = ShardedQlora::Create(fx.config, at::kFloat, at::kCPU, setup, TrainOptions{}, dq, lora, fill);
            if (!sq.ok()) throw std::runtime_error(sq.status().message());
            out.layer_shard_bytes = (*sq)->layer_shard_bytes();
            out.base_bytes = (*sq)->base_bytes();
            out.layers = (*sq)->GatherLayers();
            c10::NoGradGuard no_grad;
            out.logits = (*sq)->Forward(tokens);
            out.bytes = comm.bytes_sent();
          } catch (const std::exception& e) {
            out.error = e.what();
          }
        });
      }
      for (std::thread& t : threads) t.join();

      // Per-rank bytes of a layer, from the layout formula computed here:
      // blocks = Σ ceil(numel/64) over the seven projections.
      const int64_t C = fx.config.dim, F = fx.config.hidden_dim, KV = fx.config.n_kv_heads * fx.config.HeadDim();
      const int64_t numels[] = {C * C, KV * C, KV * C, C * C, F * C, F * C, C * F};
      int64_t blocks = 0, groups = 0;
      for (int64_t n : numels) {
        blocks += (n + 63) / 64;
        groups += ((n + 63) / 64 + 255) / 256;
      }
      const int64_t layer_bytes = dq ? (groups + W - 1) / W * 8456 : (blocks + W - 1) / W * 36;
      const int64_t V = fx.config.vocab_size;
      const int64_t base = ((V * C + W - 1) / W + (C + V * C + W - 1) / W) * 4 +
                           fx.config.n_layers * (layer_bytes + 2 * C * 4);
      const Nf4Projections* ref = model_nf4(one);
      REQUIRE(ref);
      for (const RankResult& r : results) {
        INFO(r.error);
        REQUIRE(r.error.empty());
        // A layer's tensors are read one at a time: one projection in full precision at once.
        CHECK(r.largest_layer_fill == 1);
        CHECK(r.layer_shard_bytes == layer_bytes);
        CHECK(r.base_bytes == base);
        REQUIRE(r.layers.size() == static_cast<size_t>(fx.config.n_layers));
        for (size_t l = 0; l < r.layers.size(); ++l) {
          // The gathered layer is one buffer of W shards; every part of its projections a view of it.
          const at::Tensor& gathered = r.layers[l][0].packed;
          CHECK(static_cast<int64_t>(gathered.storage().nbytes()) == W * layer_bytes);
          for (size_t p = 0; p < kProjectionCount; ++p) {
            const Nf4Tensor& got = r.layers[l][p];
            const Nf4Tensor& exp = ref->layers[l][p];
            for (const at::Tensor& t : {got.packed, dq ? got.absmax_codes : got.absmax})
              CHECK(t.is_alias_of(gathered));
            if (dq) CHECK(got.absmax_scales.is_alias_of(gathered));
            CHECK(at::equal(got.packed, exp.packed));
            if (dq) {
              CHECK(at::equal(got.absmax_codes, exp.absmax_codes));
              CHECK(at::equal(got.absmax_scales, exp.absmax_scales));
              CHECK(at::equal(got.absmax_mean, exp.absmax_mean));
            } else {
              CHECK(at::equal(got.absmax, exp.absmax));
            }
          }
        }
        CHECK((r.logits - want).abs().max().item<double>() < 1e-5);
      }
    }
  }
}

namespace {

struct Variant {
  RankLayout layout;
  bool double_quant;
};

}  // namespace

// As tests/native/distributed/dist_fsdp_test.cc (OneProcessAndRanks: both sum the same float32
// partial gradients).
TEST_CASE("dist qlora: 2 and 4 ranks, full and hybrid sharding, prefetch on and off, train a 4-bit model's adapters to the one-process adapters (< 1e-5); bytes by formula") {
  const Variant variants[] = {
      // {ranks/node, nodes, checkpoint_every, grad_accum, batch, prefetch, hybrid}, double_quant
      {{2, 1, 1, 1, 4, true, false}, false},
      {{2, 1, 0, 2, 8, false, false}, true},
      {{4, 1, 1, 1, 4, true, false}, false},
      {{2, 2, 0, 1, 4, true, false}, false},
      {{2, 2, 1, 2, 8, true, true}, false},
      {{2, 2, 0, 1, 4, false, true}, true},
  };
  Fixture fx;
  for (const Variant& variant : variants) {
    const RankLayout& v = variant.layout;
    Plan plan = fx.MakePlan(variant.double_quant);
    const std::string tag = fmt::format("w{}x{}_c{}_a{}_dq{}_{}_{}", v.nodes, v.ranks_per_node, v.checkpoint_every,
                                        v.grad_accum, variant.double_quant, v.prefetch ? "prefetch" : "sync",
                                        v.hybrid ? "hybrid" : "full");
    CAPTURE(tag);
    OneProcessAndRanks run;
    run.Run(plan, Training("fsdp", 3), v, fx.root, tag);
    const BackendOutcome &o1 = run.one_outcome, &o2 = run.ranks_outcome;

    LoraAdapters a = LoadAdapters(fx.config, run.one_dir), b = LoadAdapters(fx.config, run.ranks_dir);
    const double diff = MaxAdapterDiff(a, b);
    MESSAGE(tag << ": max abs adapter difference after 3 steps, 1 process vs " << v.world() << " ranks: " << diff);
    CHECK(diff < 1e-5);
    // They moved: B started at zero.
    CHECK(a.layers[0][0].b.abs().max().item<double>() > 1e-3);
    const std::vector<StepSample>&one_steps = run.one.events.steps, &rank_steps = run.ranks.events.steps;
    REQUIRE(rank_steps.size() == 3);
    for (size_t i = 0; i < 3; ++i) CHECK(*rank_steps[i].loss == doctest::Approx(*one_steps[i].loss).epsilon(1e-5));
    REQUIRE(Find(o2, metric::kEvalLoss));
    CHECK(*Find(o2, metric::kEvalLoss)->value == doctest::Approx(*Find(o1, metric::kEvalLoss)->value).epsilon(1e-5));
    // Every measurement says what ran.
    CHECK(Find(o2, metric::kEvalLoss)->method.find("QLoRA continued pretraining") != std::string::npos);
    const int64_t W = v.world(), Ws = v.hybrid ? v.ranks_per_node : W, R = v.hybrid ? v.nodes : 1;
    CHECK(Find(o2, metric::kEvalLoss)->method.find(
              v.hybrid ? fmt::format("base sharded over each node's {} rank(s), replicated over {} nodes", Ws, R)
                       : fmt::format("base sharded over the group's {} rank(s)", W)) != std::string::npos);

    // Bytes per rank (fsdp_qlora.h), e = 4 (float32 on CPU), W' the ranks the
    // base is sharded over (all W; hybrid: one node's), R the replicas:
    //   micro-batch  (W'−1)·S_e·4 + L·2·(W'−1)·B_l + (W'−1)·S_h·4 (the head is
    //                kept from the forward for the backward)
    //   step         each layer's adapter gradients (P_l elements): full, one
    //                all-reduce over W, 2(W−1)/W·4P_l; hybrid, reduce-scatter
    //                within the node, all-reduce across replicas, all-gather
    //                back, of P_l padded to W'; then the loss all-reduce over W
    //   eval batch   (W'−1)·(S_e·4 + L·B_l + S_h·4); then one 8-byte all-reduce over W
    const int64_t L = fx.config.n_layers, C = fx.config.dim, V = fx.config.vocab_size;
    const int64_t S_e = (V * C + Ws - 1) / Ws, S_h = (C + V * C + Ws - 1) / Ws;
    const int64_t B_l = nf4_shard_bytes(nf4_layer_layout(fx.config, variant.double_quant), static_cast<int>(Ws));
    const int64_t P_l = lora_parameter_count(fx.config, 4) / L;
    const int64_t micro = (Ws - 1) * S_e * 4 + L * 2 * (Ws - 1) * B_l + (Ws - 1) * S_h * 4;
    auto small = [](int64_t n) { return 2 * (n - 1) * 8 / n; };
    int64_t adapters = 0, replica = 0;
    if (R == 1) {
      adapters = L * (2 * (W - 1) * (4 * P_l) / W);
    } else {
      const int64_t padded = (P_l + Ws - 1) / Ws * Ws;
      const int64_t rs = 2 * (Ws - 1) * (4 * padded) / Ws;  // Gloo's reduce-scatter: an all-reduce
      replica = L * (2 * (R - 1) * (4 * padded / Ws) / R);
      adapters = L * (rs + (Ws - 1) * (4 * padded / Ws)) + replica;
    }
    const int64_t eval_batches = (HeldOut(Find(o2, metric::kEvalLoss)->method) + v.batch_size - 1) / v.batch_size;
    const int64_t per_rank = 3 * v.grad_accum * micro + 3 * (adapters + small(W)) +
                             eval_batches * (Ws - 1) * (S_e * 4 + L * B_l + S_h * 4) + small(W);
    REQUIRE(Find(o2, metric::kBytesCommunicated));
    CHECK(*Find(o2, metric::kBytesCommunicated)->value == static_cast<double>(W * per_rank));
    // Between nodes: full sharding is one ring of all W ranks, crossing at two
    // of them; hybrid keeps the base within the node: the replica rings (every
    // rank crosses) and the loss and eval all-reduces (two ranks cross).
    const int64_t between = v.nodes == 1 ? 0 : v.hybrid ? W * 3 * replica + 2 * (3 * small(W) + small(W)) : 2 * per_rank;
    REQUIRE(Find(o2, metric::kBytesBetweenNodes));
    CHECK(*Find(o2, metric::kBytesBetweenNodes)->value == static_cast<double>(between));
    // validate's figure for a step (traffic.h) is this test's.
    FsdpTrafficShape shape = TrafficShape(fx.config, v.nodes, v.ranks_per_node, v.hybrid, v.grad_accum);
    shape.nf4 = true;
    shape.double_quant = variant.double_quant;
    shape.lora_rank = 4;
    const StepTraffic step = fsdp_step_traffic(shape);
    CHECK(step.per_rank == v.grad_accum * micro + adapters + small(W));
    CHECK(step.between_nodes == (v.nodes == 1 ? 0 : v.hybrid ? W * replica + 2 * small(W) : 2 * step.per_rank));
    // ... and the counters of the training steps alone say the same.
    REQUIRE(Find(o2, metric::kBytesBetweenNodesPerStep));
    CHECK(*Find(o2, metric::kBytesBetweenNodesPerStep)->value == static_cast<double>(step.between_nodes));
    for (int r = 0; r < v.world(); ++r) {
      const Measurement* above = Find(o2, fmt::format("{}_rank{}", metric::kPeakHostRssAboveBaseline, r));
      REQUIRE(above);
      CHECK(above->method.find("bytes of the 4-bit base") != std::string::npos);
    }
  }
}

// ΔW of every projection of every layer: (alpha/r)·B·A.
static std::vector<at::Tensor> Deltas(const LoraAdapters& a) {
  std::vector<at::Tensor> out;
  for (size_t l = 0; l < a.layers.size(); ++l)
    for (int p = 0; p < kProjectionCount; ++p) out.push_back(lora_delta(a, l, static_cast<Projection>(p)));
  return out;
}

// max over every projection of |ΔW_merged − (ΔW_g0 + ΔW_g1)/2|.
static double MaxMergeError(const LoraAdapters& merged, const LoraAdapters& g0, const LoraAdapters& g1) {
  const std::vector<at::Tensor> dm = Deltas(merged), d0 = Deltas(g0), d1 = Deltas(g1);
  double worst = 0;
  for (size_t i = 0; i < dm.size(); ++i) worst = std::max(worst, (dm[i] - (d0[i] + d1[i]) / 2).abs().max().item<double>());
  return worst;
}

TEST_CASE("dist share qlora: 2 groups of 1 rank, each its own adapters; the merged adapter stacks them: ΔW = mean of the groups' ΔW") {
  Fixture fx;
  Plan plan = fx.MakePlan(false);
  CaseSpec spec = Training("share", 4);
  spec.topology.parts = {{"rig0", 2, 1}};
  Harness h;
  auto backend = MakeNativeShareBackend(Options());
  const fs::path log = fx.root / "share.log";
  BackendOutcome out = h.RunOk(*backend, plan, spec, (fx.root / "merged").string(), log.string());
  LoraAdapters merged = LoadAdapters(fx.config, fx.root / "merged");
  LoraAdapters g0 = LoadAdapters(fx.config, fx.root / "merged/group_adapters/group0");
  LoraAdapters g1 = LoadAdapters(fx.config, fx.root / "merged/group_adapters/group1");
  CHECK(merged.rank == 8);  // G·r
  CHECK(merged.alpha == 8);
  CHECK(MaxAdapterDiff(g0, g1) > 1e-3);  // the groups trained on different sequences
  const double worst = MaxMergeError(merged, g0, g1);
  MESSAGE("max |ΔW_merged − mean_g ΔW_g| = " << worst);
  CHECK(worst < 1e-6);
  REQUIRE(Find(out, metric::kEvalLoss));
  CHECK(Find(out, metric::kEvalLoss)->method.find("the exact stack of the 2 groups' adapters (rank 8)") != std::string::npos);
  // Between groups: one all-gather of each group's adapters (P float32), per rank (G−1)·4P.
  const int64_t P = lora_parameter_count(fx.config, 4);
  CHECK(*Find(out, "bytes_between_groups")->value == static_cast<double>(2 /*ranks*/ * 1 * 4 * P));
  CHECK(*Find(out, "bytes_within_groups")->value == 0);
}

TEST_CASE("dist share qlora: 2 groups of 2 ranks with A frozen and sync_every: B averaged, exact; bytes between groups by formula") {
  Fixture fx;
  Plan plan = fx.MakePlan(true);
  CaseSpec spec = Training("share", 4);
  spec.topology.parts = {{"rig0", 2, 2}};
  spec.training.batch_size = 8;
  spec.training.sync_every = 2;
  spec.training.lora_freeze_a = true;
  Harness h;
  auto backend = MakeNativeShareBackend(Options());
  const fs::path log = fx.root / "share22.log";
  BackendOutcome out = h.RunOk(*backend, plan, spec, (fx.root / "merged22").string(), log.string());
  LoraAdapters merged = LoadAdapters(fx.config, fx.root / "merged22");
  LoraAdapters g0 = LoadAdapters(fx.config, fx.root / "merged22/group_adapters/group0");
  LoraAdapters g1 = LoadAdapters(fx.config, fx.root / "merged22/group_adapters/group1");
  CHECK(merged.rank == 4);
  const double worst = MaxMergeError(merged, g0, g1);
  CHECK(worst < 1e-6);
  for (size_t l = 0; l < merged.layers.size(); ++l) {
    CHECK(at::equal(merged.layers[l][0].a, g0.layers[l][0].a));  // A never moved
    CHECK(at::equal(g0.layers[l][0].a, g1.layers[l][0].a));
  }
  REQUIRE(Find(out, metric::kEvalLoss));
  CHECK(Find(out, metric::kEvalLoss)->method.find("averaging B with A frozen") != std::string::npos);
  // Two merges (after step 2, and the final one), each an all-reduce of every
  // B over 2 groups: 2·(1/2)·lora_b_bytes per rank, 4 ranks.
  CHECK(*Find(out, "bytes_between_groups")->value == static_cast<double>(4 * 2 * lora_b_bytes(fx.config, 4)));
  CHECK(*Find(out, "bytes_within_groups")->value > 0);
}

}  // namespace protocol
