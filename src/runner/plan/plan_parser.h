#ifndef PROTOCOL_RUNNER_PLAN_PLAN_PARSER_H_
#define PROTOCOL_RUNNER_PLAN_PLAN_PARSER_H_

// Plan format v1 (docs/plan-format.md): YAML → validated, resolved Plan.
// Knows nothing of execution. Reports every problem at once, each located.

#include <optional>
#include <string>
#include <vector>

#include "runner/plan/diagnostic.h"
#include "runner/plan/plan.h"

namespace protocol {

struct PlanParseOptions {
  // Valid `backend:` values (from the backend registry); did-you-mean uses them.
  std::vector<std::string> backend_names = {"fsdp", "share", "command"};
  // `--set key.path=value` overrides, applied to the YAML tree before
  // inheritance is resolved. Path syntax: dot-separated map keys; a sequence
  // element is chosen by `[N]` (0-based index) or `[name]` matching its `name:`
  // or `id:` field, e.g. `stages[stage1].cases[2.1.1.1].timeout=60`,
  // `defaults.training.batch_size=4`. The value is parsed as YAML ("" = null).
  // Missing map keys along the path are created. Problems with an override,
  // and errors in the values it set, are located at the override itself:
  // "--set stages[stage9].timeout=5: no stage named 'stage9'".
  std::vector<std::string> overrides;
};

struct PlanParseResult {
  std::optional<Plan> plan;          // set when errors is empty
  std::vector<Diagnostic> errors;    // every problem found, in file order
  std::string source_text;           // the file's text (for RenderDiagnostics)
  bool ok() const { return errors.empty() && plan.has_value(); }
};

PlanParseResult ParsePlanFile(const std::string& path, const PlanParseOptions& options = {});
// `file_label` is used in locations ("<string>" in tests is fine).
PlanParseResult ParsePlanString(const std::string& text, const std::string& file_label,
                                const PlanParseOptions& options = {});

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_PLAN_PARSER_H_
