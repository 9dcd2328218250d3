#ifndef PROTOCOL_RUNNER_PLAN_CASE_PLACEHOLDERS_H_
#define PROTOCOL_RUNNER_PLAN_CASE_PLACEHOLDERS_H_

// The "{name}" placeholders of a case's strings (docs/plan-format.md,
// "Placeholders"): one table says which names exist, where each may be
// written and what it expands to. The parser refuses a name the table does
// not allow where it is written; the runner expands `output_dir` and the
// command backend its argv, env values and workdir with the same table, so
// what validate accepts is what a run expands. The substitution itself is
// runner/base/placeholders.h.

#include <cstdint>
#include <string>
#include <vector>

#include "runner/base/placeholders.h"
#include "runner/plan/plan.h"

namespace protocol {

// Where a placeholder is written.
enum class PlaceholderField {
  kOutputDir,  // a case's output_dir (expanded by the runner)
  kCommand,    // command.argv, command.env values, command.workdir
};

// What a value is computed from: the case of one run, one repeat.
struct PlaceholderInputs {
  const Plan& plan;
  const CaseSpec& spec;
  int repeat = 0;          // 0-based
  int64_t run_id = 0;      // the stored run
  std::string output_dir;  // already expanded (kCommand only)
};

struct CasePlaceholder {
  const char* name;     // "case_id": written "{case_id}"
  const char* meaning;  // docs/plan-format.md's row, word for word (tests/runner/plan/case_placeholders_test.cc)
  bool in_output_dir;   // may output_dir use it? (every name may appear in a command)
  std::string (*value)(const PlaceholderInputs&);
};

// Every placeholder, in the order the docs list them.
const std::vector<CasePlaceholder>& CasePlaceholders();

// The names `field` may use, in table order.
std::vector<std::string> PlaceholderNames(PlaceholderField field);

// The values of the names `field` may use, for ExpandPlaceholders.
PlaceholderValues CasePlaceholderValues(PlaceholderField field, const PlaceholderInputs& in);

// The one folder `spec` saves its model into on every run and repeat: its
// output_dir expanded as the runner expands it, absolute from the working
// directory, normalized. Empty when it has no output_dir or the folder
// changes per run or repeat ({run_id}, {repeat}).
std::string FixedOutputDir(const Plan& plan, const CaseSpec& spec);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_CASE_PLACEHOLDERS_H_
