// The plan keys of the distributed native backends (training: ranks_per_node,
// collective_timeout, sync_every, outer_lr, outer_momentum): defaults, values,
// errors, and the resolved text (written only when set).
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "backends/native/share_backend.h"
#include "runner/base/text.h"
#include "runner/plan/plan_parser.h"

namespace protocol {
namespace {

const std::string kHead =
    "protocol: 1\n"                              //  1
    "name: t\n"                                  //  2
    "models:\n"                                  //  3
    "  m7: {preset: tiny}\n"                     //  4
    "datasets:\n"                                //  5
    "  web: {format: text, path: /d/web.txt}\n"  //  6
    "stages:\n"                                  //  7
    "  - name: s1\n"                             //  8
    "    cases:\n";                              //  9

PlanParseResult Parse(const std::string& training) {
  return ParsePlanString(kHead + "      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10,\n"
                                 "         topology: 'rig0:2x1', training: " + training + "}\n",
                         "<string>");
}

std::string ErrorsOf(const PlanParseResult& r) {
  std::vector<std::string> lines;
  for (const auto& e : r.errors) lines.push_back(e.ToString());
  return Join(lines, "\n");
}

}  // namespace

TEST_CASE("dist plan: distributed training keys have documented defaults") {
  PlanParseResult r = Parse("{}");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const TrainingSettings& t = r.plan->FindCase("a")->training;
  CHECK(t.ranks_per_node == 0);
  CHECK(t.collective_timeout == 300);
  CHECK(t.sync_every == 0);
  CHECK(t.outer_lr == 1.0);
  CHECK(t.outer_momentum == 0.0);
  // Written with their values all the same: the stored text means these
  // settings whatever a later version's defaults are.
  const std::string& text = r.plan->resolved_text;
  CHECK(text.find("          ranks_per_node: 0\n          collective_timeout: 300\n          sync_every: 0\n"
                  "          outer_lr: 1\n          outer_momentum: 0\n") != std::string::npos);
}

TEST_CASE("dist plan: distributed training keys are read and resolved") {
  PlanParseResult r = Parse("{ranks_per_node: 2, collective_timeout: 30, sync_every: 5, outer_lr: 0.7, outer_momentum: 0.9}");
  INFO(ErrorsOf(r));
  REQUIRE(r.ok());
  const TrainingSettings& t = r.plan->FindCase("a")->training;
  CHECK(t.ranks_per_node == 2);
  CHECK(t.collective_timeout == 30);
  CHECK(t.sync_every == 5);
  CHECK(t.outer_lr == doctest::Approx(0.7));
  CHECK(t.outer_momentum == doctest::Approx(0.9));
  const std::string& text = r.plan->resolved_text;
  std::multiset<std::string> lines;  // trimmed, whole lines
  for (const std::string& line : Split(text, '\n')) lines.insert(Trim(line));
  for (const char* key : {"ranks_per_node: 2", "collective_timeout: 30", "sync_every: 5", "outer_lr: 0.7",
                          "outer_momentum: 0.9"})
    CHECK_MESSAGE(lines.count(key) == 1, key);
  // The resolved text parses back to the same settings.
  PlanParseResult again = ParsePlanString(text, "<resolved>");
  INFO(ErrorsOf(again));
  REQUIRE(again.ok());
  CHECK(again.plan->FindCase("a")->training.sync_every == 5);
  CHECK(again.plan->FindCase("a")->training.ranks_per_node == 2);
}

TEST_CASE("dist plan: out-of-range distributed keys are located errors") {
  CHECK(ErrorsOf(Parse("{ranks_per_node: -1, collective_timeout: 0, sync_every: -2, outer_lr: 0, outer_momentum: 1}")) ==
        "<string>:11:59: 'ranks_per_node' must be >= 0, got -1\n"
        "<string>:11:83: 'collective_timeout' must be > 0 and <= 1000000000, got 0\n"
        "<string>:11:98: 'sync_every' must be >= 0, got -2\n"
        "<string>:11:112: 'outer_lr' must be > 0 and <= 10, got 0\n"
        "<string>:11:131: 'outer_momentum' must be >= 0 and <= 0.999, got 1");
}

TEST_CASE("dist plan: the share backend's Check asks for a topology") {
  PlanParseResult r = ParsePlanString(
      kHead + "      - {id: a, workload: pretrain, backend: share, model: m7, dataset: web, steps: 10}\n", "<string>");
  REQUIRE(r.ok());
  CHECK(MakeNativeShareBackend()->Check(*r.plan, *r.plan->FindCase("a")) ==
        std::vector<std::string>{"the share backend needs a topology (node:GxK ...)"});
}

}  // namespace protocol
