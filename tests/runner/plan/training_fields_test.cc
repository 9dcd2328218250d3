// The training settings' table (training_fields.h): docs/plan-format.md lists
// exactly its rows; the defaults are TrainingSettings'; the parser reads every
// row, checks its bounds where the value is written, and the resolved text
// writes every row back. The workers' case file: dist_launcher_test.cc; the
// field-by-field round trip of whole plans: plan_emit_test.cc.

#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include "runner/base/text.h"
#include "runner/plan/plan_parser.h"
#include "training_field_checks.h"

using namespace protocol;
using protocol::testing::ChangedSettings;
using protocol::testing::DifferentFields;
using protocol::testing::FieldText;
using protocol::testing::TrainingYaml;

namespace {

const std::string kHead =
    "protocol: 1\nname: t\nmodels: {m: {preset: tiny}}\ndatasets: {d: {format: text, path: d.txt}}\n"
    "stages:\n  - name: s\n    cases:\n"
    "      - {id: a, workload: pretrain, backend: fsdp, model: m, dataset: d, steps: 10,\n"
    "         training: ";  // line 9, column 20

PlanParseResult ParseTraining(const std::string& training) {
  return ParsePlanString(kHead + training + "}\n", "<string>");
}

std::string ErrorsOf(const PlanParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

// docs/plan-format.md's "values" column for a row: its kind and bounds.
std::string ValuesText(const TrainingField& field) {
  const TrainingBounds& b = field.bounds;
  std::string text = std::visit(
      [&](auto member) -> std::string {
        using T = std::decay_t<decltype(TrainingSettings().*member)>;
        if constexpr (std::is_same_v<T, bool>) return "`true` \\| `false`";
        else if constexpr (kIsVocabularySetting<T>) return "`" + Join(NamesOf<T>(), "` \\| `") + "`";
        else if constexpr (std::is_same_v<T, double>) return fmt::format("number {} {}", b.open_min ? ">" : "≥", b.min);
        else return fmt::format("integer ≥ {}", b.min);
      },
      field.member);
  if (!std::isinf(b.max)) text += fmt::format(", ≤ {}", b.max);
  if (b.or_auto) text += " or `auto`";
  return text;
}

}  // namespace

TEST_CASE("training fields: docs/plan-format.md lists exactly the rows, with their values, defaults and meanings") {
  std::ifstream in(std::string(PROTOCOL_SOURCE_DIR) + "/docs/plan-format.md");
  std::vector<std::string> documented;
  bool inside = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "### Training settings") inside = true;
    else if (inside && line.rfind("| `", 0) == 0) documented.push_back(line);
    else if (!documented.empty()) break;  // the end of the section's table
  }
  std::vector<std::string> code;
  const TrainingSettings defaults;
  for (const TrainingField& f : TrainingFields())
    code.push_back(fmt::format("| `{}` | {} | `{}` | {} |", f.name, ValuesText(f), FieldText(f, defaults), f.meaning));
  CHECK(Join(documented, "\n") == Join(code, "\n"));
}

TEST_CASE("training fields: a default-constructed TrainingSettings holds every row's default") {
  const TrainingSettings t;
  for (const TrainingField& f : TrainingFields()) {
    CAPTURE(f.name);
    CHECK(VisitField(f, t, [&](const auto& value) {
      return value == std::get<std::decay_t<decltype(value)>>(f.default_value);
    }));
  }
  CHECK(TrainingFieldNames().size() == TrainingFields().size());
}

TEST_CASE("training fields: the parser reads every row and the resolved text writes it back") {
  const TrainingSettings changed = ChangedSettings();
  CHECK(DifferentFields(changed, TrainingSettings()).size() == TrainingFields().size());
  PlanParseResult r = ParseTraining(TrainingYaml(changed));
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  CHECK(DifferentFields(r.plan->FindCase("a")->training, changed).empty());
  PlanParseResult again = ParsePlanString(r.plan->resolved_text, "<resolved>");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(DifferentFields(again.plan->FindCase("a")->training, changed).empty());
  CHECK(again.plan->resolved_text == r.plan->resolved_text);
}

TEST_CASE("training fields: a value outside a row's bounds is refused at the value, naming the key") {
  CHECK(ErrorsOf(ParseTraining("{batch_size: 0}")) == "<string>:9:33: 'batch_size' must be > 0, got 0");
  CHECK(ErrorsOf(ParseTraining("{seed: -1}")) == "<string>:9:27: 'seed' must be >= 0, got -1");
  CHECK(ErrorsOf(ParseTraining("{learning_rate: 0}")) == "<string>:9:36: 'learning_rate' must be > 0, got 0");
  CHECK(ErrorsOf(ParseTraining("{outer_lr: 11}")) == "<string>:9:31: 'outer_lr' must be > 0 and <= 10, got 11");
  CHECK(ErrorsOf(ParseTraining("{ranks_per_node: 2000000}")) ==
        "<string>:9:37: 'ranks_per_node' is out of range: 2000000 (at most 1048576)");
  CHECK(ErrorsOf(ParseTraining("{device: metal}")) ==
        "<string>:9:29: unknown device 'metal' (expected one of: auto, cpu, cuda)");
  CHECK(ErrorsOf(ParseTraining("{lora_freeze_a: maybe}")) ==
        "<string>:9:36: expected true or false for 'lora_freeze_a', got 'maybe'");
}
