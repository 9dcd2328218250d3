// Provenance an auditor can check: `protocol report --verify` detects a
// one-character edit and names the cell; the report records its options; the
// case log's sha256 is stored (schema 2, migrated from a version-1 file); the
// binary's sha256 is in the run context.

#include <algorithm>
#include <doctest/doctest.h>

#include "regression_fixtures.h"
#include "report/verify.h"
#include "runner/base/sha256.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::testing;

namespace {

// The imported methodology figures of cli_test, as a run of kind import.
const char* kPublished = R"yaml(source: "methodology results table (test fixture)"
results:
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: fsdp, nodes: 1, metric: wall_minutes, value: 90}
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: share, nodes: 1, metric: wall_minutes, value: 30}
)yaml";

}  // namespace

TEST_CASE("verify: the report comment round-trips and names the runs explicitly") {
  ReportInvocation inv;
  inv.options.run_ids = {1, 3};
  inv.options.model = "llama2-7b";
  inv.options.candidate_system = "demo-share";
  inv.format = ReportFormat::kHtml;
  CHECK(InvocationText(inv) == "--run 1 --run 3 --model llama2-7b --candidate-system demo-share --format html");
  auto back = ParseReportComment("<!DOCTYPE html>\n<!-- protocol report: " + InvocationText(inv) + " -->\n<p>");
  REQUIRE(back.ok());
  CHECK(back->options.run_ids == std::vector<int64_t>{1, 3});
  CHECK(back->options.model == "llama2-7b");
  CHECK(back->options.baseline_system == "fsdp");
  CHECK(back->options.candidate_system == "demo-share");
  CHECK(back->format == ReportFormat::kHtml);
  CHECK(ParseReportComment("# report\n").status().code() == Status::Code::kNotFound);
  CHECK(ParseReportComment("<!-- protocol report: --run x --format md -->\n").status().message() ==
        "report comment: 'x' is not a run id");
}

TEST_CASE("verify: hostile or spaced values cannot end the comment and read back exactly") {
  ReportInvocation inv;
  inv.options.run_ids = {2};
  inv.options.baseline_system = "open source fsdp";
  inv.options.candidate_system = "x --><script>alert(1)</script>";
  inv.options.model = "llama 2 \u00e9 100%";
  inv.template_path = "my templates/r.mustache";
  const std::string text = InvocationText(inv);
  CHECK(text == "--run 2 --model llama%202%20%C3%A9%20100%25 --baseline-system open%20source%20fsdp "
                "--candidate-system x%20--%3E%3Cscript%3Ealert%281%29%3C/script%3E --format md "
                "--template my%20templates/r.mustache");
  CHECK(text.find("-->") == std::string::npos);
  CHECK(text.find('<') == std::string::npos);
  auto back = ParseReportComment("<!-- protocol report: " + text + " -->\n");
  REQUIRE(back.ok());
  CHECK(back->options.baseline_system == inv.options.baseline_system);
  CHECK(back->options.candidate_system == inv.options.candidate_system);
  CHECK(back->options.model == inv.options.model);
  CHECK(back->template_path == inv.template_path);
  CHECK(ParseReportComment("<!-- protocol report: --run 1 --model a%2 --format md -->\n").status().message() ==
        "report comment: 'a%2' has a '%' not followed by two hex digits");
}

TEST_CASE("verify: a report for a hostile system label has no live script, and --verify reads it back") {
  TempDir dir;
  WriteText(dir.path / "published.yaml", kPublished);
  REQUIRE(Protocol({"import", "published.yaml", "--db", "r.db"}, dir.path).exit_code == 0);
  for (const char* name : {"report.md", "report.html"}) {
    CAPTURE(name);
    Output written = Protocol({"report", "--db", "r.db", "--out", name, "--baseline-system", "open source",
                                     "--candidate-system", "x --><script>alert(1)</script>"},
                                    dir.path);
    INFO(written.err);
    REQUIRE(written.exit_code == 0);
    const std::string text = ReadText(dir.path / name);
    if (EndsWith(name, ".html")) CHECK(text.find("<script>alert") == std::string::npos);
    // The comment is whole: it ends at the end of its line.
    const size_t open = text.find("<!-- protocol report: ");
    REQUIRE(open != std::string::npos);
    CHECK(text.find("-->", open) + 4 == text.find('\n', open) + 1);
    Output ok = Protocol({"report", "--db", "r.db", "--verify", name}, dir.path);
    INFO(ok.out << ok.err);
    CHECK(ok.exit_code == 0);
  }
}

TEST_CASE("verify: differences name the table row and column of a changed cell") {
  std::string expected = "# r\n\n| workload | fsdp 1 node | share 1 node |\n|---|---|---|\n"
                         "| pretrain 1000 steps | 90.0 | 30.0 |\n";
  std::string edited = expected;
  edited.replace(edited.find("30.0"), 4, "31.0");
  CHECK(DescribeDifferences(edited, expected) ==
        std::vector<std::string>{"line 5, row 'pretrain 1000 steps', column 'share 1 node': the file "
                                 "has '31.0', the database gives '30.0'"});
  CHECK(DescribeDifferences("a\nb\n", "a\nc\nd\n") ==
        std::vector<std::string>{"line 2: the file has 'b', the database gives 'c'",
                                 "line 3: the file has '', the database gives 'd'",
                                 "line 4: missing in the file; the database gives ''"});
}

TEST_CASE("verify: a long HTML line is quoted whole, multi-byte characters intact") {
  // An HTML table row: the changed figure sits past the first 120 bytes, after
  // several multi-byte characters (–, →), where a prefix would cut it off.
  const std::string row = "<tr><td title=\"run 1 \u2192 run 2: measured wall time, median of 3 repeats "
                          "(fsdp 1 node \u2013 share 1 node)\">pretrain 1000 steps</td><td>{}</td></tr>";
  std::string file_line = row, db_line = row;
  file_line.replace(file_line.find("{}"), 2, "31.0");
  db_line.replace(db_line.find("{}"), 2, "30.0");
  REQUIRE(file_line.find("31.0") > 120);
  const std::string head = "<!DOCTYPE html>\n<table>\n";
  std::vector<std::string> d = DescribeDifferences(head + file_line + "\n", head + db_line + "\n");
  REQUIRE(d.size() == 1);
  CHECK(d[0] == "line 3: the file has '" + file_line + "', the database gives '" + db_line + "'");
  CHECK(IsValidUtf8(d[0]));
}

TEST_CASE("verify: `report --verify` accepts the written report and catches a one-character edit") {
  TempDir dir;
  WriteText(dir.path / "published.yaml", kPublished);
  REQUIRE(Protocol({"import", "published.yaml", "--db", "r.db"}, dir.path).exit_code == 0);
  for (const char* name : {"report.md", "report.html"}) {
    CAPTURE(name);
    // The second pass writes its report after a second import (run 2), whose
    // figures win every cell: the comment names only the runs read.
    const std::string runs = EndsWith(name, ".md") ? "--run 1" : "--run 2";
    Output written = Protocol({"report", "--db", "r.db", "--out", name}, dir.path);
    INFO(written.err);
    REQUIRE(written.exit_code == 0);
    std::string text = ReadText(dir.path / name);
    CHECK(text.find("<!-- protocol report: " + runs + " --format " +
                    std::string(EndsWith(name, ".md") ? "md" : "html") + " -->\n") != std::string::npos);
    // A later run does not change what the report re-renders to: its runs are named.
    if (EndsWith(name, ".md"))
      REQUIRE(Protocol({"import", "published.yaml", "--db", "r.db"}, dir.path).exit_code == 0);
    Output ok = Protocol({"report", "--db", "r.db", "--verify", name}, dir.path);
    INFO(ok.err);
    CHECK(ok.exit_code == 0);
    CHECK(ok.out == std::string(name) + ": matches the database byte for byte (re-rendered with " + runs + " --format " +
                        (EndsWith(name, ".md") ? "md" : "html") + ")\n");
    // One character changed: 90 → 99 in the baseline cell.
    size_t at = text.find("90.0");
    REQUIRE(at != std::string::npos);
    text[at + 1] = '9';
    // The changed cell's line, counted in the file (the template's layout may move it).
    const std::string line = "line " + std::to_string(std::count(text.begin(), text.begin() + at, '\n') + 1);
    WriteText(dir.path / name, text);
    Output bad = Protocol({"report", "--db", "r.db", "--verify", name}, dir.path);
    CHECK(bad.exit_code == 1);
    std::vector<std::string> lines = Split(bad.out, '\n');
    REQUIRE(lines.size() == 3);  // the verdict, one difference, the final newline
    CHECK(lines[0] == std::string(name) + ": DIFFERS from the database (re-rendered with " + runs + " --format " +
                          (EndsWith(name, ".md") ? "md" : "html") + "):");
    if (EndsWith(name, ".md"))
      CHECK(lines[1] == "  " + line + ", row 'pretrain 1000 steps', column 'fsdp 1 node': the file has '99.0', the "
                        "database gives '90.0'");
    else  // the changed cell's line of the page
      CHECK_MESSAGE(StartsWith(lines[1], "  " + line + ": the file has '<tr><th>pretrain 1000 steps</th>"), lines[1]);
    CHECK(lines[2] == "");
  }
}

TEST_CASE("provenance: a version-1 database is migrated; runs store the log and binary sha256") {
  TempDir dir;
  std::filesystem::copy_file(FixturePath("schema-v1.db"), dir.path / "old.db");
  {
    auto store = OpenStore((dir.path / "old.db").string());
    REQUIRE(store.ok());
    auto cases = (*store)->CasesOfRun(1);
    REQUIRE(cases.ok());
    REQUIRE(cases->size() == 1);
    CHECK(cases->at(0).case_id == "a");
    CHECK(cases->at(0).log_sha256 == "");  // not recorded before schema 2
  }
  CHECK(StoreSchemaVersion() >= 2);

  WriteText(dir.path / "p.yaml", R"yaml(protocol: 1
name: p
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp}
stages:
  - name: s
    cases:
      - {id: a, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [2]},
         command: {argv: [sh, -c, "echo hello"]}}
)yaml");
  Output run = Protocol({"run", "p.yaml", "--db", "old.db", "--logs", "logs"}, dir.path);
  INFO(run.err);
  REQUIRE(run.exit_code == 0);
  auto store = OpenStore((dir.path / "old.db").string());
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(2);
  REQUIRE(cases.ok());
  REQUIRE(cases->size() == 1);
  auto sha = Sha256File(cases->at(0).log_path);
  REQUIRE(sha.ok());
  CHECK(cases->at(0).log_sha256 == sha.value());  // the log, footer included
  auto context = (*store)->GetContext(2);
  REQUIRE(context.ok());
  std::string binary;
  for (const auto& [k, v] : *context)
    if (k == "protocol_binary_sha256") binary = v;
  CHECK(binary == Sha256File(PROTOCOL_NATIVE_BINARY).value());  // the program that ran the cases
}
