#include "runner/plan/case_placeholders.h"

#include <filesystem>

#include "runner/base/placeholders.h"
#include "runner/base/text.h"

namespace protocol {
namespace {

using In = PlaceholderInputs;

std::string ModelPath(const In& in) {
  auto it = in.plan.models.find(in.spec.model);
  return it == in.plan.models.end() ? "" : in.plan.ResolvePath(it->second.path);
}

std::string DatasetPath(const In& in) {
  auto it = in.plan.datasets.find(in.spec.dataset);
  return it == in.plan.datasets.end() ? "" : in.plan.ResolvePath(it->second.path);
}

// The length's count when it is in `unit`, else "".
std::string Count(const In& in, Length::Unit unit) {
  return in.spec.length && in.spec.length->unit == unit ? std::to_string(in.spec.length->count) : "";
}

std::string Tokens(const In& in) {
  std::vector<std::string> tokens;
  for (int n : in.spec.inference.max_new_tokens) tokens.push_back(std::to_string(n));
  return Join(tokens, ",");
}

bool Allowed(PlaceholderField field, const CasePlaceholder& p) {
  return field == PlaceholderField::kCommand || p.in_output_dir;
}

}  // namespace

const std::vector<CasePlaceholder>& CasePlaceholders() {
  static const std::vector<CasePlaceholder> rows = {
      {"case_id", "the case id, e.g. `2.1.1.1`", true, [](const In& in) { return in.spec.id; }},
      {"repeat", "the 0-based repeat index", true, [](const In& in) { return std::to_string(in.repeat); }},
      {"model", "the model's name in `models:`", true, [](const In& in) { return in.spec.model; }},
      {"model_path", "the model's `path`, resolved against the plan's directory", true, ModelPath},
      {"dataset", "the dataset's name in `datasets:`", true, [](const In& in) { return in.spec.dataset; }},
      {"dataset_path", "the dataset's `path`, resolved against the plan's directory", true, DatasetPath},
      {"output_dir", "the case's output directory, already expanded (commands only)", false,
       [](const In& in) { return in.output_dir; }},
      {"steps", "the length in steps; empty for epochs and for inference", true,
       [](const In& in) { return Count(in, Length::Unit::kSteps); }},
      {"epochs", "the length in epochs; empty for steps and for inference", true,
       [](const In& in) { return Count(in, Length::Unit::kEpochs); }},
      {"nodes", "the node count", true, [](const In& in) { return std::to_string(in.spec.nodes); }},
      {"topology", "the canonical topology, e.g. `rig0:2x4 rig1:2x4`", true,
       [](const In& in) { return in.spec.topology.ToString(); }},
      {"network", "the network label", true, [](const In& in) { return in.spec.network; }},
      {"prompt", "the inference prompt", true, [](const In& in) { return in.spec.inference.prompt; }},
      {"max_new_tokens", "the schedule joined with commas: `100,110,...,400`", true, Tokens},
      {"plan_dir", "the absolute directory of the plan file", true,
       [](const In& in) { return in.plan.Directory(); }},
      {"plan", "the plan's `name`", true, [](const In& in) { return in.plan.name; }},
      {"stage", "the name of the case's stage", true, [](const In& in) { return in.spec.stage; }},
      {"run_id", "the run's id in the results database", true,
       [](const In& in) { return std::to_string(in.run_id); }},
  };
  return rows;
}

std::vector<std::string> PlaceholderNames(PlaceholderField field) {
  std::vector<std::string> names;
  for (const CasePlaceholder& p : CasePlaceholders())
    if (Allowed(field, p)) names.push_back(p.name);
  return names;
}

PlaceholderValues CasePlaceholderValues(PlaceholderField field, const PlaceholderInputs& in) {
  PlaceholderValues values;
  for (const CasePlaceholder& p : CasePlaceholders())
    if (Allowed(field, p)) values.emplace_back(p.name, p.value(in));
  return values;
}

std::string FixedOutputDir(const Plan& plan, const CaseSpec& spec) {
  if (spec.output_dir.empty() || spec.output_dir.find("{run_id}") != std::string::npos ||
      spec.output_dir.find("{repeat}") != std::string::npos)
    return "";
  const std::string dir =
      ExpandPlaceholders(spec.output_dir, CasePlaceholderValues(PlaceholderField::kOutputDir, {plan, spec, 0, 0, ""}));
  std::error_code ec;
  return std::filesystem::absolute(dir, ec).lexically_normal().string();
}

}  // namespace protocol
