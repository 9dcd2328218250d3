// The command line's shared conventions through the real binary, with exact
// output and exit codes: the export format follows --out's extension (and a
// contradicting --format is refused), one run-spec syntax with one error
// style wherever a run is named, and --log-level before or after the
// subcommand. Exit codes for database I/O errors: cli_exit_codes_test.cc.

#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cli_support.h"
#include "runner/base/json.h"
#include "runner/store/store.h"

namespace fs = std::filesystem;
using namespace protocol;
using namespace protocol::testing;

namespace {

// Two imports of the same two published figures: runs 1 and 2, plan "pub".
const char* kPublished = R"yaml(source: "published table (test fixture)"
results:
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: fsdp, nodes: 1, metric: wall_minutes, value: 90}
  - {model: llama2-7b, workload: pretrain, steps: 1000, backend: share, nodes: 1, metric: wall_minutes, value: 30}
)yaml";

void ImportTwice(const TempDir& dir) {
  WriteFile(dir.path / "pub.yaml", kPublished);
  for (int i = 0; i < 2; ++i) REQUIRE(Protocol({"import", "pub.yaml", "--db", "i.db"}, dir.path).exit_code == 0);
}


const std::string kCsvHeader =
    "row_id,run_id,kind,plan,plan_sha256,case_id,repeat,stage,model,workload,backend,system,nodes,topology,network,"
    "variant,length_unit,length_count,report_as_unit,report_as_count,status,reason,exit_code,started_at,finished_at,"
    "log_path,log_sha256,name,value,unit,how,method,source,marker,at_length_unit,at_length_count,rank\r\n";

// The CSV of one import run of i.db: its two cases (rows 2·run−1 and 2·run),
// with the times the store gave them.
std::string CsvOfRun(const TempDir& dir, int run) {
  const std::vector<CaseRecord> cases = CasesOf(dir.path / "i.db", run);
  REQUIRE(cases.size() == 2);
  const std::string r = std::to_string(run);
  auto identity = [&](const CaseRecord& c, const char* system) {
    return fmt::format("{},{},import,pub,,{},0,import,llama2-7b,pretrain,import,{},1,,,,steps,1000,,0,ok,,,{},{},,,",
                       c.row_id, run, c.case_id, system, c.started_at, c.finished_at);
  };
  return kCsvHeader + identity(cases[0], "fsdp") +
         "wall_seconds,5400,s,imported,converted from 90 min,published table (test fixture),,,,\r\n" +
         identity(cases[1], "share") +
         "wall_seconds,1800,s,imported,converted from 30 min,published table (test fixture),,,,\r\n";
}

// The last line of `text`, without its newline.
std::string LastLine(const std::string& text) {
  std::string t = text;
  if (!t.empty() && t.back() == '\n') t.pop_back();
  return t.substr(t.rfind('\n') == std::string::npos ? 0 : t.rfind('\n') + 1);
}

}  // namespace

TEST_CASE("cli export: the format follows --out's extension; --format wins; a contradiction is refused") {
  TempDir dir;
  ImportTwice(dir);
  Output csv = Protocol({"export", "--db", "i.db", "--run", "2", "--out", "two.csv"}, dir.path);
  CHECK(csv.exit_code == 0);
  CHECK(csv.out == "");
  CHECK(csv.err == "[info] wrote two.csv\n");
  CHECK(ReadAll(dir.path / "two.csv") == CsvOfRun(dir, 2));

  Output json = Protocol({"export", "--db", "i.db", "--run", "1", "--out", "one.json"}, dir.path);
  CHECK(json.exit_code == 0);
  Json doc = Json::parse(ReadAll(dir.path / "one.json"));
  CHECK(doc["schema_version"] == StoreSchemaVersion());
  REQUIRE(doc["runs"].size() == 1);
  CHECK(doc["runs"][0]["id"] == 1);

  // An extension that names no format: --format decides, else JSON.
  Output txt = Protocol({"export", "--db", "i.db", "--run", "1", "--format", "csv", "--out", "one.txt"}, dir.path);
  CHECK(txt.exit_code == 0);
  CHECK(ReadAll(dir.path / "one.txt") == CsvOfRun(dir, 1));
  Output plain = Protocol({"export", "--db", "i.db", "--run", "1", "--out", "one.txt"}, dir.path);
  CHECK(plain.exit_code == 0);
  CHECK(Json::parse(ReadAll(dir.path / "one.txt"))["runs"][0]["id"] == 1);
  // --format agreeing with the extension is fine; to stdout, --format alone.
  CHECK(Protocol({"export", "--db", "i.db", "--format", "csv", "--out", "all.csv"}, dir.path).exit_code == 0);
  Output out = Protocol({"export", "--db", "i.db", "--run", "2", "--format", "csv"}, dir.path);
  CHECK(out.exit_code == 0);
  CHECK(out.out == CsvOfRun(dir, 2));

  Output conflict = Protocol({"export", "--db", "i.db", "--format", "json", "--out", "x.csv"}, dir.path);
  CHECK(conflict.exit_code == 2);
  CHECK(conflict.out == "");
  CHECK(conflict.err ==
        "protocol: --format json contradicts the file name x.csv (a csv file): drop --format or rename the file\n");
  CHECK_FALSE(fs::exists(dir.path / "x.csv"));
  // The report follows the same rule.
  Output report = Protocol({"report", "--db", "i.db", "--format", "html", "--out", "r.md"}, dir.path);
  CHECK(report.exit_code == 2);
  CHECK(report.err ==
        "protocol: --format html contradicts the file name r.md (a md file): drop --format or rename the file\n");
  Output unknown = Protocol({"export", "--db", "i.db", "--format", "xml"}, dir.path);
  CHECK(unknown.exit_code == 2);
  CHECK(unknown.err == "protocol: unknown export format 'xml' (json, csv or telemetry-csv)\n");
}

TEST_CASE("cli: every command that names a run takes ID | latest | latest:PLAN, with one error style") {
  TempDir dir;
  ImportTwice(dir);  // runs 1 and 2 (imports)
  WriteFile(dir.path / "quick.yaml", kQuickPlan);
  REQUIRE(Protocol({"run", "quick.yaml", "--db", "i.db", "--logs", "logs"}, dir.path).exit_code == 0);  // run 3

  // latest and latest:quick are run 3 everywhere.
  for (const char* spec : {"3", "latest", "latest:quick"}) {
    INFO(spec);
    Output show = Protocol({"show", spec, "--db", "i.db", "--json"}, dir.path);
    CHECK(show.exit_code == 0);
    CHECK(Json::parse(show.out)["id"] == 3);
    Output exported = Protocol({"export", "--db", "i.db", "--run", spec}, dir.path);
    CHECK(exported.exit_code == 0);
    REQUIRE(Json::parse(exported.out)["runs"].size() == 1);
    CHECK(Json::parse(exported.out)["runs"][0]["id"] == 3);
    Output report = Protocol({"report", "--db", "i.db", "--run", spec}, dir.path);
    CHECK(report.exit_code == 0);
    CHECK(report.out.rfind("<!-- protocol report: --run 3 --format md -->\n", 0) == 0);
    Output compare = Protocol({"compare", spec, "3", "--db", "i.db", "--json"}, dir.path);
    CHECK(compare.exit_code == 0);
    CHECK(Json::parse(compare.out)["baseline_run"] == 3);
    Output resume = Protocol({"run", "quick.yaml", "--db", "i.db", "--logs", "logs", "--resume", spec}, dir.path);
    CHECK(resume.exit_code == 0);
    // The last line (a load warning may come first on a busy machine): nothing was left to run.
    CHECK(LastLine(resume.err) == "protocol: run 3 finished: 0 ok, 0 failed, 0 timeout, 0 skipped, 0 interrupted "
                                  "(database i.db)");
  }

  // An unknown run: exit 2 and the same sentence from every command.
  const std::vector<std::vector<std::string>> commands = {
      {"show", "SPEC"},           {"export", "--run", "SPEC"},       {"report", "--run", "SPEC"},
      {"compare", "SPEC", "3"},   {"compare", "3", "SPEC"},          {"run", "quick.yaml", "--logs", "logs", "--resume", "SPEC"}};
  const std::vector<std::pair<std::string, std::string>> unknown = {
      {"99", "protocol: unknown run '99': the database has runs 1 to 3\n"},
      {"latest:nightly", "protocol: unknown run 'latest:nightly': no run of plan 'nightly' (plans run: quick)\n"},
      {"x", "protocol: 'x' is not a run: write an id, 'latest' or 'latest:PLAN'\n"}};
  for (const auto& command : commands) {
    for (const auto& [spec, message] : unknown) {
      std::vector<std::string> args;
      for (const std::string& a : command) args.push_back(a == "SPEC" ? spec : a);
      args.insert(args.end(), {"--db", "i.db"});
      INFO(args[0] << " " << spec);
      Output o = Protocol(args, dir.path);
      CHECK(o.exit_code == 2);
      CHECK(o.out == "");
      CHECK(o.err == message);
    }
  }
  // latest counts plan runs only: a database of imports has none.
  REQUIRE(Protocol({"import", "pub.yaml", "--db", "imports-only.db"}, dir.path).exit_code == 0);
  Output no_runs = Protocol({"show", "latest", "--db", "imports-only.db"}, dir.path);
  CHECK(no_runs.exit_code == 2);
  CHECK(no_runs.err ==
        "protocol: unknown run 'latest': the database has no runs of a plan yet (run one first: protocol run PLAN)\n");
}

TEST_CASE("cli: --log-level works before and after the subcommand") {
  TempDir dir;
  ImportTwice(dir);
  Output info = Protocol({"report", "--db", "i.db", "--out", "a.md"}, dir.path);
  CHECK(info.exit_code == 0);
  CHECK(info.err == "[info] wrote a.md\n");
  Output before = Protocol({"--log-level", "quiet", "report", "--db", "i.db", "--out", "b.md"}, dir.path);
  CHECK(before.exit_code == 0);
  CHECK(before.err == "");
  Output after = Protocol({"report", "--db", "i.db", "--out", "c.md", "--log-level", "quiet"}, dir.path);
  CHECK(after.exit_code == 0);
  CHECK(after.err == "");
  CHECK(ReadAll(dir.path / "c.md") == ReadAll(dir.path / "a.md"));
  Output bad = Protocol({"list", "--db", "i.db", "--log-level", "loud"}, dir.path);
  CHECK(bad.exit_code == 2);
  CHECK(bad.err == "--log-level: loud not in {quiet,info,debug}\nRun with --help for more information.\n");
}

TEST_CASE("cli: an unknown command or option is named, with the near one or where to look") {
  TempDir dir;
  Output typo = Protocol({"rnu", "plan.yaml"}, dir.path);
  CHECK(typo.exit_code == 2);
  CHECK(typo.err == "protocol: unknown command 'rnu' (did you mean 'run'?)\n");
  Output after_option = Protocol({"--log-level", "quiet", "reprot", "--db", "i.db"}, dir.path);
  CHECK(after_option.exit_code == 2);
  CHECK(after_option.err == "protocol: unknown command 'reprot' (did you mean 'report'?)\n");
  Output far = Protocol({"estimate", "plan.yaml"}, dir.path);
  CHECK(far.exit_code == 2);
  CHECK(far.err ==
        "protocol: unknown command 'estimate' (commands: run, validate, calibrate, list, show, report, import, "
        "export, compare, backends)\n");
  // An option its command does not have: the near one, else where to look.
  Output option = Protocol({"report", "--fromat", "md"}, dir.path);
  CHECK(option.exit_code == 2);
  CHECK(option.err == "protocol report: unknown option '--fromat' (did you mean '--format'?)\n");
  Output with_value = Protocol({"--log-level", "quiet", "list", "--dbb=x.db"}, dir.path);
  CHECK(with_value.exit_code == 2);
  CHECK(with_value.err == "protocol list: unknown option '--dbb' (did you mean '--db'?)\n");
  Output unlike = Protocol({"list", "--zzzzzzzz"}, dir.path);
  CHECK(unlike.exit_code == 2);
  CHECK(unlike.err == "protocol list: unknown option '--zzzzzzzz' (protocol list --help lists its options)\n");
  // No command at all is the parser's own message.
  Output none = Protocol({}, dir.path);
  CHECK(none.exit_code == 2);
  CHECK(none.err == "A subcommand is required\nRun with --help for more information.\n");
}

TEST_CASE("cli report: --further-baseline chooses the baselines set against share beside fsdp, and the comment keeps it") {
  TempDir dir;
  WriteFile(dir.path / "pub.yaml", R"yaml(source: "published table (test fixture)"
results:
  - {model: m, workload: pretrain, steps: 100, backend: fsdp, nodes: 2, network: 80G, metric: wall_minutes, value: 30}
  - {model: m, workload: pretrain, steps: 100, backend: fsdp-hybrid, nodes: 2, network: 10G, metric: wall_minutes, value: 20}
  - {model: m, workload: pretrain, steps: 100, backend: share, nodes: 2, network: 10G, metric: wall_minutes, value: 10}
)yaml");
  REQUIRE(Protocol({"import", "pub.yaml", "--db", "i.db"}, dir.path).exit_code == 0);
  Output with = Protocol({"report", "--db", "i.db", "--out", "with.md"}, dir.path);
  REQUIRE(with.exit_code == 0);
  const std::string md = ReadAll(dir.path / "with.md");
  CHECK(md.rfind("<!-- protocol report: --run 1 --format md -->\n", 0) == 0);
  CHECK(md.find("| pretrain 100 steps — 2 nodes | 30.0 | 3.00 | – | 20.0 | 2.00 | – | 10.0 | – |") !=
        std::string::npos);
  Output without = Protocol({"report", "--db", "i.db", "--further-baseline", "none", "--out", "without.md"}, dir.path);
  REQUIRE(without.exit_code == 0);
  const std::string plain = ReadAll(dir.path / "without.md");
  CHECK(plain.rfind("<!-- protocol report: --run 1 --further-baseline none --format md -->\n", 0) == 0);
  CHECK(plain.find("against each baseline") == std::string::npos);
  CHECK(plain.find("- pretrain 100 steps fsdp-hybrid 2 nodes (10G): newest ok result run 1") != std::string::npos);
  for (const char* file : {"with.md", "without.md"}) {
    Output verified = Protocol({"report", "--db", "i.db", "--verify", file}, dir.path);
    CHECK(verified.exit_code == 0);
  }
}
