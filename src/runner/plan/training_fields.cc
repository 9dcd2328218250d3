#include "runner/plan/training_fields.h"

#include <string>
#include <type_traits>

namespace protocol {
namespace {

template <typename T>
struct NonDeduced {
  using type = T;
};

// One row; the default has the member's type (a mismatch does not compile).
template <typename T>
TrainingField Row(const char* name, T TrainingSettings::*member, typename NonDeduced<T>::type default_value,
                  const char* meaning, TrainingBounds bounds = {}) {
  return TrainingField{name, member, TrainingValue(std::in_place_type<T>, default_value), meaning, bounds};
}

using S = TrainingSettings;

}  // namespace

TrainingBounds AtLeast(double min, double max) { return TrainingBounds{min, max, false}; }
TrainingBounds Above(double min, double max) { return TrainingBounds{min, max, true}; }
TrainingBounds OrAuto(TrainingBounds bounds) {
  bounds.or_auto = true;
  return bounds;
}

bool IsAutoSetting(const TrainingField& field, const TrainingSettings& settings) {
  if (!field.bounds.or_auto) return false;
  return VisitField(field, settings, [](const auto& value) {
    if constexpr (std::is_same_v<std::decay_t<decltype(value)>, int64_t>) return value == kSettingAuto;
    else return false;
  });
}

const std::vector<TrainingField>& TrainingFields() {
  static const std::vector<TrainingField> rows = {
      Row("batch_size", &S::batch_size, 8, "sequences per optimizer step (over all ranks)", AtLeast(1)),
      Row("seq_len", &S::seq_len, 128, "tokens per sequence", AtLeast(1)),
      Row("grad_accum", &S::grad_accum, 1, "micro-batches per optimizer step", AtLeast(1)),
      Row("learning_rate", &S::learning_rate, 3e-4, "the optimizer's learning rate", Above(0)),
      Row("seed", &S::seed, 1234, "seed of the data order, random weights and LoRA adapters", AtLeast(0)),
      Row("device", &S::device, DeviceChoice::kAuto,
          "where the model computes: `auto` (a GPU where the node has one), `cpu`, `cuda`"),
      Row("threads", &S::threads, 0,
          "CPU threads of the case on each host, split evenly over its ranks there (at least 1 each), for one "
          "process and for ranks alike; 0 = every hardware thread of the host (or OMP_NUM_THREADS when set)",
          AtLeast(0, 1 << 20)),
      Row("ranks_per_node", &S::ranks_per_node, 0, "fsdp: ranks on each node; 0 = max(1, the node's gpus)",
          AtLeast(0, 1 << 20)),
      Row("collective_timeout", &S::collective_timeout, 300.0,
          "seconds for the rendezvous and each collective; a hung rank ends there", Above(0, 1e9)),
      Row("sync_every", &S::sync_every, 0, "share: merge the groups every N steps (DiLoCo); 0 = only at the end",
          AtLeast(0)),
      Row("outer_lr", &S::outer_lr, 1.0, "share: outer learning rate of a merge (1 = plain averaging)",
          Above(0, 10)),
      Row("outer_momentum", &S::outer_momentum, 0.0, "share: outer Nesterov momentum of a merge (0 = none)",
          AtLeast(0, 0.999)),
      Row("lora_rank", &S::lora_rank, 8, "rank r of the LoRA adapters (4-bit models)", AtLeast(1)),
      Row("lora_alpha", &S::lora_alpha, 16.0, "LoRA scale: an adapter's update is scaled by alpha/r", Above(0)),
      Row("checkpoint_every", &S::checkpoint_every, kCheckpointAuto,
          "activation checkpointing: decoder layer l is recomputed in backward when l is a multiple of k "
          "(1 = every layer, 0 = none); `auto` = none where the case's memory estimate without it fits, every "
          "layer where it does not (validate says which)",
          OrAuto(AtLeast(0))),
      Row("lora_freeze_a", &S::lora_freeze_a, false,
          "train only the adapters' B; A stays at its seeded start (exact share merges)"),
      Row("prefetch", &S::prefetch, true,
          "FSDP: issue the next unit's all-gather before the current unit computes, in forward and backward, and "
          "wait for gradient reductions only when their result is needed (PyTorch FSDP's prefetch); false = every "
          "collective waited at once"),
      Row("sharding", &S::sharding, Sharding::kFull,
          "fsdp: `full` shards every unit over all ranks of the case (FULL_SHARD); `hybrid` shards within each node "
          "and replicates across nodes, so only gradient shards cross between nodes (HYBRID_SHARD)"),
      Row("reduce_dtype", &S::reduce_dtype, ReduceDtype::kAuto,
          "dtype of the gradient reductions: `auto` = the compute dtype (bfloat16 on a GPU, float32 on a CPU), "
          "`float32`, `bfloat16`"),
      Row("outer_state", &S::outer_state, OuterState::kHost,
          "share: where a merge's outer state (theta_global, the outer momentum: float32 copies of the rank's merged "
          "slice) lives: `host` (as torchft's DiLoCo; copied only at a merge) or `device`"),
      Row("merge_dtype", &S::merge_dtype, ReduceDtype::kAuto,
          "share: dtype of a merge's one flat all-reduce (the pseudo-gradient theta_global - theta): `auto` = the "
          "compute dtype (bfloat16 on a GPU, float32 on a CPU), `float32`, `bfloat16`"),
      Row("eval_every", &S::eval_every, 0,
          "evaluate the held-out split every N optimizer steps, at step 0 and at the last step: the curve of "
          "held-out loss against training time (share: at the first merge from each such step on); 0 = only at "
          "the end",
          AtLeast(0)),
      Row("link_probe", &S::link_probe, true,
          "multi-node native cases: before the first step, time an all-reduce between the nodes at a few sizes and "
          "store the link's bus bandwidth and latency (at most 10 s); false = not measured"),
  };
  return rows;
}

std::vector<std::string> TrainingFieldNames() {
  std::vector<std::string> names;
  for (const TrainingField& f : TrainingFields()) names.push_back(f.name);
  return names;
}

TrainingSettings::TrainingSettings() {
  for (const TrainingField& f : TrainingFields())
    VisitField(f, *this, [&](auto& value) { value = std::get<std::decay_t<decltype(value)>>(f.default_value); });
}

}  // namespace protocol
