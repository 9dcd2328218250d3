// The placeholder table (case_placeholders.h): docs/plan-format.md lists
// exactly its rows, docs/runner.md and docs/backends.md name no other, and
// the parser accepts a name exactly where the table allows it. That the
// runner expands every name output_dir may use: runner_test.cc; that the
// command backend expands every name: command_backend_test.cc.

#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "runner/base/text.h"
#include "runner/plan/case_placeholders.h"
#include "runner/plan/plan_parser.h"

using namespace protocol;

namespace {

std::vector<std::string> DocLines(const std::string& doc) {
  std::ifstream in(std::string(PROTOCOL_SOURCE_DIR) + "/docs/" + doc);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A plan whose one command case writes `text` in its output_dir or its argv.
PlanParseResult ParseWith(const std::string& output_dir, const std::string& argv) {
  return ParsePlanString(
      "protocol: 1\nname: t\nmodels: {m: {preset: tiny}}\nstages:\n  - name: s\n    cases:\n"
      "      - {id: a, workload: pretrain, backend: command, system: fsdp, model: m, steps: 1,\n"
      "         output_dir: \"" + output_dir + "\", command: {argv: [run, \"" + argv + "\"]}}\n",
      "<string>");
}

}  // namespace

TEST_CASE("placeholders: docs/plan-format.md lists exactly the table's rows, with their values") {
  std::vector<std::string> documented;
  bool inside = false;
  for (const std::string& line : DocLines("plan-format.md")) {
    if (line == "### Placeholders") inside = true;
    else if (inside && line.rfind("| `{", 0) == 0) documented.push_back(line);
    else if (!documented.empty()) break;  // the end of the section's table
  }
  std::vector<std::string> code;
  for (const CasePlaceholder& p : CasePlaceholders()) code.push_back(fmt::format("| `{{{}}}` | {} |", p.name, p.meaning));
  CHECK(Join(documented, "\n") == Join(code, "\n"));
}

TEST_CASE("placeholders: docs/runner.md and docs/backends.md name only placeholders of the table") {
  const std::vector<std::string> known = PlaceholderNames(PlaceholderField::kCommand);
  static const std::regex kName(R"(`[^`]*\{([a-z_]+)\}[^`]*`)");
  for (const char* doc : {"runner.md", "backends.md"}) {
    std::set<std::string> named;
    for (const std::string& line : DocLines(doc))
      for (std::sregex_iterator it(line.begin(), line.end(), kName), end; it != end; ++it) named.insert((*it)[1]);
    CAPTURE(doc);
    CHECK(named.size() >= 3);
    for (const std::string& name : named) {
      CAPTURE(name);
      // `{name}` is the generic form, not a placeholder.
      CHECK((std::find(known.begin(), known.end(), name) != known.end() || name == "name"));
    }
  }
}

TEST_CASE("placeholders: the parser accepts a name exactly where the table allows it") {
  for (const CasePlaceholder& p : CasePlaceholders()) {
    CAPTURE(p.name);
    const std::string written = "x/{" + std::string(p.name) + "}";
    PlanParseResult in_output_dir = ParseWith(written, "y");
    CHECK(in_output_dir.ok() == p.in_output_dir);
    if (!p.in_output_dir)
      CHECK(in_output_dir.errors.at(0).message ==
            fmt::format("unknown placeholder '{{{}}}' in output_dir", p.name));
    CHECK(ParseWith("o", written).ok());  // a command may use every one
  }
  // output_dir may use every name but its own.
  const std::vector<std::string> in_output_dir = PlaceholderNames(PlaceholderField::kOutputDir);
  CHECK(in_output_dir.size() + 1 == CasePlaceholders().size());
  CHECK(std::find(in_output_dir.begin(), in_output_dir.end(), "output_dir") == in_output_dir.end());
}
