#ifndef PROTOCOL_RUNNER_PLAN_DIAGNOSTIC_H_
#define PROTOCOL_RUNNER_PLAN_DIAGNOSTIC_H_

// A located problem in an input file (plan, import file), reported all at once.

#include <string>
#include <vector>

#include "runner/plan/plan.h"

namespace protocol {

struct Diagnostic {
  SourceLocation where;
  std::string message;  // "unknown backend 'fdsp'"
  std::string hint;     // "did you mean 'fsdp'?" or "" — rendered in parentheses
  // "plans/x.yaml:12:5: unknown backend 'fdsp' (did you mean 'fsdp'?)"
  std::string ToString() const;
};

// One diagnostic per line, each followed by the offending source line and a
// caret under the column when `source_text` has that line (ninja style).
std::string RenderDiagnostics(const std::vector<Diagnostic>& diagnostics,
                              const std::string& source_text);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_DIAGNOSTIC_H_
