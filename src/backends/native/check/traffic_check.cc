#include "backends/native/check/native_check.h"

#include <optional>

#include "backends/native/check/check_support.h"
#include "backends/native/distributed/sharding.h"
#include "backends/native/estimate/memory_estimate.h"  // FormatBytes
#include "backends/native/estimate/traffic.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

std::string native_case_traffic(const Plan& plan, const CaseSpec& spec, NativeRole role) {
  if (spec.workload == Workload::kInference) return "";
  auto model = plan.models.find(spec.model);
  if (model == plan.models.end()) return "";
  std::optional<ModelConfig> config = Dimensions(plan, model->second);
  auto layout = role == NativeRole::kFsdp ? FsdpLayout(plan, spec) : ShareLayout(plan, spec);
  if (!config || !layout.ok()) return "";
  const int64_t nodes = layout->nodes();
  if (nodes < 2) return "";
  const bool gpu = OnGpu(spec, CaseNodes(plan, spec, *layout));
  if (role == NativeRole::kShare) {
    ShareTrafficShape t;
    t.config = *config;
    t.nodes = nodes;
    t.groups = layout->groups;
    t.ranks_per_group = layout->group_size;
    t.nf4 = IsNf4(model->second);
    t.lora_rank = spec.training.LoraRank();
    t.lora_freeze_a = spec.training.lora_freeze_a;
    t.merge_bytes = CommunicationBytes(spec.training.merge_dtype, gpu);
    const int64_t merges = ShareMerges(spec);
    return fmt::format("between nodes: nothing in a step (each group trains on its node); {} per merge{}",
                       FormatBytes(share_merge_between_nodes(t)),
                       merges > 0 ? fmt::format(", {} merge(s) in {}", merges, spec.length->ToString()) : "");
  }
  // This case's strategy, and every other strategy of the table (sharding.h) on the same ranks.
  const FsdpTrafficShape t = FsdpTraffic(spec, model->second, *config, *layout, gpu);
  const StepTraffic mine = fsdp_step_traffic(t);
  auto how = [&](const FsdpTrafficShape& shape, const StepTraffic& traffic) {
    return shape.replicas > 1
               ? std::string("every rank all-reduces its gradient slices with its replicas on the other node(s); "
                             "gathers and reduce-scatters stay within a node")
               : fmt::format("one ring of {} ranks crosses between the {} nodes at {} ranks, each sending {} per step",
                             layout->world(), nodes, nodes, FormatBytes(traffic.per_rank));
  };
  std::string text = fmt::format("between nodes per step: {} ({} sharding: {})", FormatBytes(mine.between_nodes),
                                 StrategyOf(spec.training.sharding).name, how(t, mine));
  for (const ShardingStrategy& other : ShardingStrategies()) {
    if (other.sharding == spec.training.sharding) continue;
    CaseSpec alternative = spec;
    alternative.training.sharding = other.sharding;
    const StepTraffic theirs = fsdp_step_traffic(FsdpTraffic(alternative, model->second, *config, *layout, gpu));
    text += fmt::format("; {} sharding would send {} ({:.3g}x)", other.name, FormatBytes(theirs.between_nodes),
                        mine.between_nodes > 0
                            ? static_cast<double>(theirs.between_nodes) / static_cast<double>(mine.between_nodes)
                            : 0.0);
  }
  return text;
}

}  // namespace native
}  // namespace protocol
