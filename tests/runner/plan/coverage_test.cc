// Which training-table cells a plan fills before it runs (coverage.h), and
// the check that the two sides of a row compute on the same resources.
#include <doctest/doctest.h>

#include "runner/base/text.h"
#include "runner/plan/coverage.h"
#include "runner/plan/plan_parser.h"

using namespace protocol;

namespace {

Plan ParseCases(const std::string& cases) {
  const std::string text =
      "protocol: 1\nname: t\n"
      "models:\n  m: {preset: tiny, path: /nowhere, init: random}\n"
      "datasets:\n  web: {format: text, path: /nowhere/web.txt}\n"
      "cluster:\n  nodes:\n"
      "    - {name: rig0, host: rig0, gpus: 8}\n"
      "    - {name: rig1, host: rig1, gpus: 8}\n"
      "defaults: {model: m, dataset: web}\n"
      "stages:\n  - name: s\n    cases:\n" + cases;
  PlanParseResult r = ParsePlanString(text, "<string>");
  std::string errors;
  for (const auto& e : r.errors) errors += e.ToString() + "\n";
  INFO(errors);
  REQUIRE(r.ok());
  return *r.plan;
}

const char* const kCases =
    "      - {id: b1, backend: fsdp, workload: pretrain, nodes: 1, steps: 1000, report_as: [100]}\n"
    "      - {id: b2, backend: fsdp, workload: pretrain, nodes: 2, network: 80G, steps: 100, report_as: 1000}\n"
    "      - {id: c1, backend: share, workload: pretrain, topology: 'rig0:2x4', steps: 1000, not_provided: 100}\n"
    "      - {id: c2, backend: share, workload: pretrain, topology: 'rig0:2x4 rig1:2x4', network: 10G,\n"
    "         steps: 1000}\n"
    "      - {id: f1, backend: fsdp, workload: finetune, nodes: 1, epochs: 1}\n";

}  // namespace

TEST_CASE("coverage: each case fills its own length, its report_as lengths (*) and its not_provided ones (X)") {
  Plan plan = ParseCases(kCases);
  std::vector<CoverageTable> tables = TrainingCoverage(plan, "fsdp", "share");
  REQUIRE(tables.size() == 1);
  const CoverageTable& t = tables[0];
  CHECK(t.model == "m");
  std::vector<std::string> labels;
  for (const TableColumn& c : t.columns) labels.push_back(c.label);
  CHECK(labels == std::vector<std::string>{"fsdp 1 node", "share 1 node", "fsdp 2 nodes (80G)", "share 2 nodes"});
  std::vector<std::string> rows;
  for (const CoverageRow& r : t.rows) rows.push_back(r.Label());
  CHECK(rows == std::vector<std::string>{"pretrain 100 steps", "pretrain 1000 steps", "finetune 1 epoch"});
  const CoverageRow& short_row = t.rows[0];
  CHECK(*short_row.cells[0].fill == CellFill::kPrefix);
  CHECK(short_row.cells[0].case_id == "b1");
  CHECK(*short_row.cells[1].fill == CellFill::kNotProvided);
  CHECK(*short_row.cells[2].fill == CellFill::kMeasured);
  CHECK_FALSE(short_row.cells[3].fill.has_value());
  CHECK(short_row.cells[3].why_empty == "no share 2 nodes case gives pretrain 100 steps (c2 gives 1000 steps)");
  CHECK(*t.rows[1].cells[2].fill == CellFill::kExtrapolated);
  CHECK(t.rows[2].cells[1].why_empty == "no share 1 node finetune case");

  const std::string text = RenderCoverage(tables);
  INFO(text);
  CHECK(text.find("  pretrain 100 steps   * b1         X c1          b2                  \u2013\n") != std::string::npos);
  CHECK(text.find("  pretrain 1000 steps  b1           c1            * b2                c2\n") != std::string::npos);
  CHECK(text.find("  empty: pretrain 100 steps, share 2 nodes: no share 2 nodes case gives pretrain 100 steps "
                  "(c2 gives 1000 steps)\n") != std::string::npos);
}

TEST_CASE("coverage: a length in epochs cannot come from a case in steps, and the reason says so") {
  Plan plan = ParseCases(
      "      - {id: b1, backend: fsdp, workload: finetune, nodes: 1, epochs: 1}\n"
      "      - {id: c1, backend: share, workload: finetune, topology: 'rig0:2x4', steps: 500}\n");
  std::vector<CoverageTable> tables = TrainingCoverage(plan, "fsdp", "share");
  REQUIRE(tables.size() == 1);
  const CoverageRow& epoch = tables[0].rows[1];
  REQUIRE(epoch.Label() == "finetune 1 epoch");
  CHECK(epoch.cells[1].why_empty ==
        "no share 1 node case gives finetune 1 epoch (c1 gives 500 steps (a length in steps cannot give one in "
        "epochs))");
}

TEST_CASE("coverage: the two sides of a row on the same node count must have the same ranks and devices") {
  Plan plan = ParseCases(kCases);
  std::vector<CoverageTable> tables = TrainingCoverage(plan, "fsdp", "share");
  // Baseline cases on 1 process, candidates on 8 ranks per node: the 1-node and 2-node pairs differ.
  ResourcesOf resources = [](const CaseSpec& c) -> std::optional<CaseResources> {
    if (c.backend == "fsdp") return CaseResources{c.nodes == 1 ? 1 : 16, c.nodes, c.nodes == 1 ? "1 GPU" : "16 GPUs"};
    return CaseResources{8 * c.nodes, c.nodes, fmt::format("{} GPUs", 8 * c.nodes)};
  };
  auto warnings = UnequalSides(plan, tables, "share", resources);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].first == "c1");
  CHECK(warnings[0].second ==
        "pretrain 1000 steps, 1 node: fsdp (case b1) runs 1 rank on 1 node, 1 GPU; share (case c1) runs 8 ranks on "
        "1 node, 8 GPUs: the two sides of the ratio differ in ranks and devices");
  // Equal sides: nothing to say.
  ResourcesOf equal = [](const CaseSpec& c) -> std::optional<CaseResources> {
    return CaseResources{8 * c.nodes, c.nodes, fmt::format("{} GPUs", 8 * c.nodes)};
  };
  CHECK(UnequalSides(plan, tables, "share", equal).empty());
}

TEST_CASE("coverage: a further baseline's columns follow the baseline's, and its sides are checked against the candidate") {
  Plan plan = ParseCases(std::string(kCases) +
                         "      - {id: h2, backend: fsdp, workload: pretrain, nodes: 2, network: 10G, steps: 100,\n"
                         "         report_as: 1000, training: {sharding: hybrid}}\n");
  // Without the further baseline its case fills no column (as before).
  std::vector<CoverageTable> plain = TrainingCoverage(plan, "fsdp", "share");
  REQUIRE(plain.size() == 1);
  CHECK(plain[0].columns.size() == 4);
  std::vector<CoverageTable> tables = TrainingCoverage(plan, "fsdp", "share", {"fsdp-hybrid"});
  REQUIRE(tables.size() == 1);
  const CoverageTable& t = tables[0];
  std::vector<std::string> labels;
  for (const TableColumn& c : t.columns) labels.push_back(c.label);
  // Named with its network like the baseline on two nodes; never among the candidate's columns.
  CHECK(labels == std::vector<std::string>{"fsdp 1 node", "share 1 node", "fsdp 2 nodes (80G)",
                                           "fsdp-hybrid 2 nodes (10G)", "share 2 nodes"});
  REQUIRE(t.rows.size() == 3);
  CHECK(*t.rows[0].cells[3].fill == CellFill::kMeasured);
  CHECK(t.rows[0].cells[3].case_id == "h2");
  CHECK(*t.rows[1].cells[3].fill == CellFill::kExtrapolated);
  CHECK(t.rows[2].cells[3].why_empty == "no fsdp-hybrid 2 nodes (10G) finetune case");
  const std::string text = RenderCoverage(tables);
  INFO(text);
  CHECK(text.find("fsdp 2 nodes (80G)  fsdp-hybrid 2 nodes (10G)  share 2 nodes") != std::string::npos);

  // The further baseline's case is one side of a ratio with the candidate: a difference in ranks is said.
  ResourcesOf resources = [](const CaseSpec& c) -> std::optional<CaseResources> {
    if (c.id == "h2") return CaseResources{2, 2, "2 GPUs"};
    return CaseResources{8 * c.nodes, c.nodes, fmt::format("{} GPUs", 8 * c.nodes)};
  };
  auto warnings = UnequalSides(plan, tables, "share", resources);
  REQUIRE(warnings.size() == 1);
  CHECK(warnings[0].first == "c2");
  CHECK(warnings[0].second ==
        "pretrain 1000 steps, 2 nodes: fsdp-hybrid (case h2) runs 2 ranks on 2 nodes, 2 GPUs; share (case c2) runs "
        "16 ranks on 2 nodes, 16 GPUs: the two sides of the ratio differ in ranks and devices");
}
