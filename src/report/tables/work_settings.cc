#include "report/tables/work_settings.h"

#include <algorithm>

#include "report/tables/stored_plan.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

std::string Bool(bool b) { return b ? "true" : "false"; }

// "100, 110, …, 400 (31 requests, 7750 tokens)": every value, so that two
// schedules of the same length and total still differ where they differ.
std::string ScheduleText(const InferenceSchedule& s) {
  std::vector<std::string> values;
  for (int n : s.max_new_tokens) values.push_back(std::to_string(n));
  return fmt::format("{} ({} request{}, {} tokens)", Join(values, ", "), s.max_new_tokens.size(),
                     s.max_new_tokens.size() == 1 ? "" : "s", s.TotalTokens());
}

}  // namespace

WorkSettings CaseWorkSettings(const Plan& plan, const CaseSpec& spec) {
  WorkSettings out;
  auto model = plan.models.find(spec.model);
  if (model != plan.models.end()) {
    const ModelSpec& m = model->second;
    out.emplace_back("model", m.path.empty() ? "preset " + m.preset : m.path);
    out.emplace_back("quantization", NameOf(m.quantization));
    if (m.quantization != Quantization::kNone) out.emplace_back("double_quant", Bool(m.double_quant));
  }
  const TrainingSettings& t = spec.training;
  out.emplace_back("device", NameOf(t.device));
  if (spec.workload == Workload::kInference) {
    out.emplace_back("prompt", spec.inference.prompt);
    out.emplace_back("request schedule", ScheduleText(spec.inference));
    out.emplace_back("ignore_eos", Bool(spec.inference.ignore_eos));
    out.emplace_back("decode_step", NameOf(spec.inference.decode_step));
    return out;
  }
  auto dataset = plan.datasets.find(spec.dataset);
  out.emplace_back("dataset", dataset == plan.datasets.end() ? spec.dataset : dataset->second.path);
  out.emplace_back("seq_len", std::to_string(t.seq_len));
  out.emplace_back("batch_size", std::to_string(t.batch_size));
  if (model != plan.models.end() && model->second.quantization != Quantization::kNone) {
    out.emplace_back("lora_rank", std::to_string(t.lora_rank));
    out.emplace_back("lora_alpha", fmt::format("{}", t.lora_alpha));
    out.emplace_back("lora_freeze_a", Bool(t.lora_freeze_a));
  }
  return out;
}

std::map<std::string, WorkSettings> PlanWorkSettings(const std::string& plan_text) {
  std::map<std::string, WorkSettings> out;
  for (auto& [id, stored] : ReadStoredPlan(plan_text)) out[id] = std::move(stored.work);
  return out;
}

std::vector<std::string> WorkDifferences(const WorkSettings& a, const WorkSettings& b) {
  std::vector<std::string> out;
  auto value_of = [](const WorkSettings& s, const std::string& name) -> std::string {
    for (const auto& [n, v] : s)
      if (n == name) return v;
    return "(none)";
  };
  std::vector<std::string> names;
  for (const auto& [n, v] : a) names.push_back(n);
  for (const auto& [n, v] : b)
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  for (const std::string& n : names) {
    const std::string x = value_of(a, n), y = value_of(b, n);
    if (x != y) out.push_back(fmt::format("{}: {} vs {}", n, x, y));
  }
  return out;
}

}  // namespace protocol
