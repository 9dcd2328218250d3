// Reference bands: the plan's `reference:` key (parsed, inherited, located
// errors), the verdicts and their messages, and `protocol run --check`.

#include <doctest/doctest.h>

#include "regression_fixtures.h"
#include "runner/analysis/reference_check.h"
#include "runner/base/text.h"
#include "runner/plan/plan_parser.h"

using namespace protocol;
using namespace protocol::testing;

namespace {

// Line 9 holds the first case.
const std::string kHead =
    "protocol: 1\n"                                      // 1
    "name: t\n"                                          // 2
    "models:\n"                                          // 3
    "  m: {preset: tiny}\n"                              // 4
    "defaults: {model: m, backend: command, system: fsdp,\n"  // 5
    "           reference: {wall_minutes: [93, -5%, +10%]}}\n"  // 6
    "stages:\n"                                          // 7
    "  - name: s\n"                                      // 8
    "    cases:\n";                                      // 9 (cases from line 10)

const std::string kCase =
    "      - {id: a, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},\n"
    "         command: {argv: [\"true\"]}";

std::string ErrorsOf(const PlanParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

CompareCase Row(const std::string& id, int repeat, double wall_seconds, CaseStatus status = CaseStatus::kOk) {
  CompareCase c;
  c.record.case_id = id;
  c.record.repeat = repeat;
  c.record.status = status;
  c.measurements.push_back({"wall_seconds", wall_seconds, "s", Provenance::kMeasured, "", "", ""});
  return c;
}

}  // namespace

TEST_CASE("reference: bands parse, merge key by key with defaults, and resolve") {
  PlanParseResult r = ParsePlanString(
      kHead + kCase + ",\n         reference: {tokens_per_second: [12.5, -10%, +50%]}}\n", "<string>");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const CaseSpec& c = *r.plan->Cases()[0];
  REQUIRE(c.references.size() == 2);
  CHECK(c.references[0].metric == "wall_minutes");
  CHECK(c.references[0].value == 93);
  CHECK(c.references[0].lower == doctest::Approx(-0.05));
  CHECK(c.references[0].upper == doctest::Approx(0.10));
  CHECK(c.references[0].where.line == 6);
  CHECK(c.references[1].metric == "tokens_per_second");
  CHECK(c.references[1].value == 12.5);
  CHECK(c.references[1].lower == doctest::Approx(-0.10));
  CHECK(c.references[1].upper == doctest::Approx(0.50));
  CHECK(BandText(c.references[1]) == "\u221210 % \u2026 +50 %");
  // The resolved text carries the bands, so the plan hash covers them.
  CHECK(r.plan->resolved_text.find("reference:") != std::string::npos);
  PlanParseResult again = ParsePlanString(r.plan->resolved_text, "resolved.yaml");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(again.plan->Cases()[0]->references.size() == 2);
  CHECK(again.plan->Cases()[0]->references[1].upper == doctest::Approx(0.5));
}

TEST_CASE("reference: malformed bands are located errors") {
  PlanParseResult r = ParsePlanString(
      kHead + kCase +
          ",\n         reference: {wall_minutes: [93, 5%, +10%], Tokens: [1, -1%, +1%], x: 3,\n"
          "                     y: [0, -1%, -2%]}}\n",
      "<string>");
  CHECK(ErrorsOf(r) ==
        "<string>:12:41: expected a lower tolerance like '-5%' for 'reference.wall_minutes', got '5%'\n"
        "<string>:12:52: 'Tokens' is not a metric name (e.g. wall_minutes, tokens_per_second)\n"
        "<string>:12:78: expected [value, -lower%, +upper%] for 'reference.x', got '3' "
        "(e.g. wall_minutes: [93, -5%, +10%])\n"
        "<string>:13:26: the reference value of 'reference.y' must be > 0, got 0\n"
        "<string>:13:34: expected an upper tolerance like '+10%' for 'reference.y', got '-2%'");
}

TEST_CASE("reference: outside the band says by how much; inside passes; no figure fails") {
  PlanParseResult r = ParsePlanString(kHead + kCase + "}\n" +
                                          "      - {id: b, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},\n"
                                          "         command: {argv: [\"true\"]}}\n" +
                                          "      - {id: c, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},\n"
                                          "         command: {argv: [\"true\"]}, reference: {tokens_per_second: [12.5, -10%, +50%]}}\n",
                                      "<string>");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  std::vector<CompareCase> rows = {Row("a", 0, 105.2 * 60), Row("b", 0, 94 * 60), Row("b", 1, 95 * 60),
                                   Row("b", 2, 99 * 60), Row("c", 0, 10, CaseStatus::kFailed)};
  std::vector<ReferenceVerdict> v = CheckReferences(*r.plan, rows);
  REQUIRE(v.size() == 4);  // a: wall; b: wall; c: wall + tokens/s
  CHECK_FALSE(v[0].pass);
  CHECK(v[0].message ==
        "wall time 105.2 min is 13.1 % above the reference 93 min (band \u22125 % \u2026 +10 %)");
  CHECK(v[1].pass);
  CHECK(*v[1].value == 95);
  CHECK(v[1].message ==
        "wall time 95 min (median of 3 repeats) is within the band of the reference 93 min "
        "(2.2 % above; band \u22125 % \u2026 +10 %)");
  CHECK_FALSE(v[2].pass);
  CHECK(v[2].message ==
        "wall time: no figure to check against the reference 93 min: the case did not end ok (failed)");
  // An ok case without the metric fails too.
  rows.back().record.status = CaseStatus::kOk;
  v = CheckReferences(*r.plan, rows);
  CHECK(v[3].message == "no measured tokens_per_second to check against the reference 12.5 tokens/s");
  CHECK_FALSE(v[3].pass);
  // 10 % below 93 min is below the -5 % bound.
  v = CheckReferences(*r.plan, {Row("a", 0, 83.7 * 60)});
  REQUIRE(v.size() == 1);
  CHECK(v[0].message ==
        "wall time 83.7 min is 10.0 % below the reference 93 min (band \u22125 % \u2026 +10 %)");
}

TEST_CASE("reference: `run --check` exits 1 outside a band and stores the verdict in the run context") {
  TempDir dir;
  WriteText(dir.path / "p.yaml", R"yaml(protocol: 1
name: p
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp}
stages:
  - name: s
    cases:
      - {id: fast, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sh, -c, "echo tokens_per_second 10"],
                   metrics: [{name: tokens_per_second, regex: 'tokens_per_second (\S+)', unit: tokens/s}]},
         reference: {tokens_per_second: [12.5, -10%, +50%]}}
      - {id: ok, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sh, -c, "echo tokens_per_second 13"],
                   metrics: [{name: tokens_per_second, regex: 'tokens_per_second (\S+)', unit: tokens/s}]},
         reference: {tokens_per_second: [12.5, -10%, +50%]}}
)yaml");
  std::string xml = (dir.path / "run.xml").string();
  Output plain = Protocol({"run", "p.yaml", "--db", "r.db", "--logs", "logs"}, dir.path);
  INFO(plain.err);
  CHECK(plain.exit_code == 0);  // without --check the bands are not consulted
  Output checked =
      Protocol({"run", "p.yaml", "--db", "r.db", "--logs", "logs", "--check", "--junit", xml}, dir.path);
  INFO(checked.err);
  CHECK(checked.exit_code == 1);
  CHECK(checked.err.find("protocol: check FAIL fast: tokens per second 10 tokens/s is 20.0 % below the "
                         "reference 12.5 tokens/s (band \u221210 % \u2026 +50 %)\n") != std::string::npos);
  CHECK(checked.err.find("protocol: check: 2 references, 1 outside its band\n") != std::string::npos);
  auto store = OpenStore((dir.path / "r.db").string());
  REQUIRE(store.ok());
  auto context = (*store)->GetContext(2);
  REQUIRE(context.ok());
  std::vector<std::string> checks;
  for (const auto& [k, v] : *context)
    if (StartsWith(k, "reference_check ")) checks.push_back(k + " = " + v.substr(0, 5));
  CHECK(Join(checks, "; ") ==
        "reference_check fast tokens_per_second = fail:; reference_check ok tokens_per_second = pass:");
  std::string junit = ReadText(xml);
  CHECK(junit.find("type=\"reference\"") != std::string::npos);
  CHECK(junit.find("failures=\"1\"") != std::string::npos);
}
