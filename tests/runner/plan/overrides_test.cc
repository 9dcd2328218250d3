// `--set PATH=VALUE` (overrides.h): missing maps along the path are created,
// selectors into what the plan lacks are errors that name the path, and the
// examples of docs/plan-format.md apply to every shipped plan.

#include "runner/plan/overrides.h"

#include <doctest/doctest.h>

#include <filesystem>

#include "runner/plan/plan_parser.h"

using namespace protocol;

namespace {

YamlNode Tree(const std::string& text) {
  YamlParse parse = ParseYaml(text, "plan.yaml");
  REQUIRE(parse.ok);
  return parse.root;
}

}  // namespace

TEST_CASE("overrides: every missing map along the path is created") {
  YamlNode root = Tree("name: x\ndefaults:\n  timeout: 1h\n");
  CHECK(ApplyOverride(root, "defaults.training.batch_size=4", -1) == "");
  CHECK(ApplyOverride(root, "a.b.c.d=5", -2) == "");
  CHECK(EmitYaml(root) ==
        "name: x\ndefaults:\n  timeout: 1h\n  training:\n    batch_size: 4\na:\n  b:\n    c:\n      d: 5\n");
  // An empty value on the way ("training:") is a map to fill.
  YamlNode empty = Tree("defaults:\n  training:\n");
  CHECK(ApplyOverride(empty, "defaults.training.batch_size=4", -1) == "");
  CHECK(EmitYaml(empty) == "defaults:\n  training:\n    batch_size: 4\n");
}

TEST_CASE("overrides: a selector into a missing or non-list value is an error naming the path") {
  YamlNode root = Tree("name: x\nstages:\n  - name: s1\n    cases: []\n");
  CHECK(ApplyOverride(root, "defaults.list[0]=1", -1) == "the plan has no 'defaults.list', so [0] selects nothing");
  CHECK(ApplyOverride(root, "stages[s1].cases[2.1].steps=3", -1) == "no case named '2.1'");
  CHECK(ApplyOverride(root, "stages[s1].cases[0]=3", -1) == "index 0 is out of range ('stages[s1].cases' has 0 items)");
  CHECK(ApplyOverride(root, "name[0]=3", -1) == "'name' is 'x', not a list");
}

TEST_CASE("overrides: docs/plan-format.md's examples apply to every shipped plan") {
  for (const auto& entry : std::filesystem::directory_iterator(std::string(PROTOCOL_SOURCE_DIR) + "/plans")) {
    if (entry.path().extension() != ".yaml") continue;
    CAPTURE(entry.path().filename().string());
    YamlParse parse = ParseYamlFile(entry.path().string());
    REQUIRE(parse.ok);
    CHECK(ApplyOverride(parse.root, "defaults.training.batch_size=4", -1) == "");
    CHECK(ApplyOverride(parse.root, "defaults.timeout=30m", -2) == "");
    CHECK(ApplyOverride(parse.root, "stages[0].defaults.timeout=30m", -3) == "");
    // A case picked by its id, and a map the case does not have yet.
    const YamlNode* stages = parse.root.Find("stages");
    REQUIRE(stages);
    const YamlNode* first = stages->items.at(0).Find("cases")->items.at(0).Find("id");
    REQUIRE(first);
    std::string stage = stages->items.at(0).Find("name")->scalar;
    CHECK(ApplyOverride(parse.root, "stages[" + stage + "].cases[" + first->scalar + "].training.batch_size=32", -4) ==
          "");
  }
}

TEST_CASE("overrides: the case-level example of the docs parses on llama70b.yaml") {
  PlanParseOptions options;
  options.overrides = {"stages[stage1].cases[2.1.1.1].training.batch_size=32", "defaults.training.batch_size=16"};
  PlanParseResult r = ParsePlanFile(std::string(PROTOCOL_SOURCE_DIR) + "/plans/llama70b.yaml", options);
  REQUIRE(r.plan);
  CHECK(r.plan->FindCase("2.1.1.1")->training.batch_size == 32);
  for (const auto& e : r.errors) CHECK(e.ToString().find("--set") == std::string::npos);
}
