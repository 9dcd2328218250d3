// Tests of the list / show / export renderers (src/runner/store/export.cc) on a
// small in-memory store: exact text, CSV quoting, JSON parse-back.

#include <doctest/doctest.h>

#include "runner/base/json.h"
#include "runner/base/text.h"
#include "runner/store/export.h"
#include "runner/store/store.h"
#include "store_fixtures.h"

using namespace protocol;

namespace {

// Two runs: a measured run with an ok, a failed and a skipped case; an import
// with a not-provided figure whose text needs CSV quoting.
std::unique_ptr<Store> SmallStore() {
  auto opened = OpenStore(":memory:");
  REQUIRE(opened.ok());
  std::unique_ptr<Store> store = std::move(opened).value();

  RunRecord run;
  run.plan_name = "methodology";
  run.plan_title = "FSDP vs share";
  run.plan_file = "plans/methodology.yaml";
  run.plan_text = "name: methodology\n";
  run.plan_sha256 = "ab12";
  run.started_at = "2024-05-01T10:00:00Z";
  run.finished_at = "2024-05-01T12:00:00Z";
  run.status = "failed";
  run.protocol_version = "0.1.0";
  run.git_revision = "1234abc";
  int64_t id = *store->CreateRun(run);
  REQUIRE(store->PutContext(id, {{"host", "rig0"}, {"cuda", "12.2"}}).ok());

  CaseRecord c;
  c.run_id = id;
  c.case_id = "2.1.1.1";
  c.stage = "open source";
  c.model = "llama2-70b";
  c.workload = "pretrain";
  c.backend = "fsdp";
  c.system = "fsdp";
  c.nodes = 1;
  c.length_unit = "steps";
  c.length_count = 100;
  c.report_as_unit = "steps";
  c.report_as_count = 1000;
  c.started_at = "2024-05-01T10:00:00Z";
  c.log_path = "logs/1/2.1.1.1.log";
  int64_t row = *store->BeginCase(c);
  CaseResult ok;
  ok.exit_code = 0;
  ok.finished_at = "2024-05-01T11:00:00Z";
  ok.measurements = {
      {"wall_seconds", 360.5, "s", Provenance::kMeasured, "", "", ""},
      {"wall_seconds", 3605, "s", Provenance::kExtrapolated, "x10 from 100 steps", "", ""}};
  ok.steps = {{1, 3.5, 2.5, 1024}, {2, 3.25, std::nullopt, std::nullopt}};
  REQUIRE(store->FinishCase(row, ok).ok());

  c.case_id = "2.1.1.5";
  c.workload = "inference";
  c.length_unit = "";
  c.length_count = 0;
  c.report_as_unit = "";
  c.report_as_count = 0;
  c.log_path = "";
  row = *store->BeginCase(c);
  CaseResult failed;
  failed.status = CaseStatus::kFailed;
  failed.reason = "CUDA out of memory";
  failed.exit_code = 1;
  failed.finished_at = "2024-05-01T11:30:00Z";
  failed.measurements = {{"wall_seconds", 12.25, "s", Provenance::kMeasured, "", "", ""}};
  failed.requests = {{0, 100, 17, 100, 4.5, "Perhaps.", std::vector<int>{3, 1, 4}}};
  REQUIRE(store->FinishCase(row, failed).ok());

  c.case_id = "2.2.1.1";
  c.workload = "pretrain";
  c.backend = "share";
  c.system = "share";
  c.nodes = 2;
  c.topology = "rig0:2x4 rig1:2x4";
  c.network = "10G";
  row = *store->BeginCase(c);
  CaseResult skipped;
  skipped.status = CaseStatus::kSkipped;
  skipped.reason = "excluded by --only";
  REQUIRE(store->FinishCase(row, skipped).ok());

  RunRecord imp;
  imp.kind = "import";
  imp.plan_name = "published";
  imp.source = "paper, \"table 2\"";
  imp.started_at = "2024-05-02T09:00:00Z";
  imp.finished_at = "2024-05-02T09:00:00Z";
  imp.status = "ok";
  int64_t imp_id = *store->CreateRun(imp);
  CaseRecord ic;
  ic.run_id = imp_id;
  ic.case_id = "2.1.1.2";
  ic.model = "llama2-70b";
  ic.workload = "pretrain";
  ic.backend = "import";
  ic.system = "fsdp";
  ic.nodes = 2;
  ic.network = "IB Conn, other cloud";
  ic.length_unit = "steps";
  ic.length_count = 100;
  row = *store->BeginCase(ic);
  CaseResult imported;
  imported.measurements = {
      {"wall_seconds", std::nullopt, "min", Provenance::kImported, "", "paper, \"table 2\"\nrow 3",
       "not-provided"},
      {"wall_seconds", 61.5, "min", Provenance::kImported, "", "paper", "extrapolated"}};
  REQUIRE(store->FinishCase(row, imported).ok());
  return store;
}

}  // namespace

TEST_CASE("RenderRunList prints aligned columns with case counts") {
  auto store = SmallStore();
  auto text = RenderRunList(*store, false);
  REQUIRE(text.ok());
  CHECK(*text ==
        "ID  KIND    PLAN         STARTED               STATUS  CASES  OK  FAILED\n"
        " 1  run     methodology  2024-05-01T10:00:00Z  failed      3   1       1\n"
        " 2  import  published    2024-05-02T09:00:00Z  ok          1   1       0\n");
}

TEST_CASE("RenderRunList on an empty store says so") {
  auto store = std::move(OpenStore(":memory:")).value();
  CHECK(*RenderRunList(*store, false) == "no runs stored\n");
  CHECK(*RenderRunList(*store, true) == "[]\n");
}

TEST_CASE("RenderRunList as JSON carries the counts") {
  auto store = SmallStore();
  auto text = RenderRunList(*store, true);
  REQUIRE(text.ok());
  Json j = Json::parse(*text);
  REQUIRE(j.size() == 2);
  CHECK(j[0]["id"] == 1);
  CHECK(j[0]["plan_name"] == "methodology");
  CHECK(j[0]["status"] == "failed");
  CHECK(j[0]["cases"] == 3);
  CHECK(j[0]["ok"] == 1);
  CHECK(j[0]["failed"] == 1);
  CHECK(j[1]["kind"] == "import");
  CHECK(j[1]["finished_at"] == "2024-05-02T09:00:00Z");
}

TEST_CASE("RenderRunDetails shows context, statuses, reasons, provenance and samples") {
  auto store = SmallStore();
  auto text = RenderRunDetails(*store, 1, false);
  REQUIRE(text.ok());
  CHECK(*text == R"(run 1: methodology (run)
  title      FSDP vs share
  plan file  plans/methodology.yaml
  sha256     ab12
  started    2024-05-01T10:00:00Z
  finished   2024-05-01T12:00:00Z
  status     failed
  protocol   0.1.0, git 1234abc
context
  host  rig0
  cuda  12.2
cases (3)
  case 2.1.1.1 repeat 0 (row 1)
    what     llama2-70b pretrain, 100 steps, reported as 1000 steps
    system   fsdp (backend fsdp), 1 node
    stage    open source
    status   ok (exit 0)
    time     2024-05-01T10:00:00Z .. 2024-05-01T11:00:00Z
    log      logs/1/2.1.1.1.log
    samples  2 steps, 0 requests
    measurements
      wall_seconds  360.5  s  measured
      wall_seconds   3605  s  extrapolated: x10 from 100 steps
  case 2.1.1.5 repeat 0 (row 2)
    what     llama2-70b inference
    system   fsdp (backend fsdp), 1 node
    stage    open source
    status   failed: CUDA out of memory (exit 1)
    time     2024-05-01T10:00:00Z .. 2024-05-01T11:30:00Z
    samples  0 steps, 1 request
    measurements
      wall_seconds  12.25  s  measured
  case 2.2.1.1 repeat 0 (row 3)
    what     llama2-70b pretrain
    system   share (backend share), 2 nodes, topology rig0:2x4 rig1:2x4, network 10G
    stage    open source
    status   skipped: excluded by --only
    time     2024-05-01T10:00:00Z .. (not finished)
    samples  0 steps, 0 requests
    no measurements
)");
}

TEST_CASE("RenderRunDetails keeps multi-line text on one line and shows markers") {
  auto store = SmallStore();
  auto text = RenderRunDetails(*store, 2, false);
  REQUIRE(text.ok());
  CHECK(*text == R"(run 2: published (import)
  source    paper, "table 2"
  started   2024-05-02T09:00:00Z
  finished  2024-05-02T09:00:00Z
  status    ok
cases (1)
  case 2.1.1.2 repeat 0 (row 4)
    what     llama2-70b pretrain, 100 steps
    system   fsdp (backend import), 2 nodes, network IB Conn, other cloud
    status   ok
    samples  0 steps, 0 requests
    measurements
      wall_seconds     -  min  imported: paper, "table 2"\nrow 3 [not-provided]
      wall_seconds  61.5  min  imported: paper [extrapolated]
)");
}

TEST_CASE("RenderRunDetails sums up a distributed case's communication in one line") {
  auto store = std::move(OpenStore(":memory:")).value();
  const int64_t id = testing::CreateQuickstartRun(*store);
  CaseRecord c = testing::TwoNodeTinyPretrain(id, "qn.1.2-hybrid", "fsdp-hybrid");
  CaseResult ok;
  ok.facts = {{"sharding", "hybrid: 1 rank(s) per node x 2 nodes (sharded within a node, replicated across)"},
              {"prefetch", "on"}};
  ok.measurements = {{"wall_seconds", 3.25, "s", Provenance::kMeasured, "", "", ""},
                     {"bytes_between_nodes", 13107200, "bytes", Provenance::kMeasured, "", "", ""},
                     {"bytes_between_nodes_per_step", 1048576, "bytes", Provenance::kMeasured, "", "", ""},
                     {"comm_exposed_seconds_rank0", 0.01, "s", Provenance::kMeasured, "", "", ""},
                     {"comm_exposed_seconds", 0.0125, "s", Provenance::kMeasured, "", "", ""},
                     {"comm_in_flight_seconds", 0.05, "s", Provenance::kMeasured, "", "", ""},
                     {"comm_hidden_share", 0.75, "", Provenance::kMeasured, "", "", ""}};
  REQUIRE(store->FinishCase(*store->BeginCase(c), ok).ok());
  // A one-process case stores none of them: no line.
  c.case_id = "n.1";
  c.system = "fsdp";
  c.nodes = 1;
  CaseResult plain;
  plain.measurements = {{"wall_seconds", 1.5, "s", Provenance::kMeasured, "", "", ""}};
  REQUIRE(store->FinishCase(*store->BeginCase(c), plain).ok());
  auto text = RenderRunDetails(*store, id, false);
  REQUIRE(text.ok());
  INFO(*text);
  CHECK(text->find("    communication  12.50 MiB between nodes (1.00 MiB a training step); per step 0.0125 s exposed "
                   "of 0.05 s in flight (75.0 % hidden)\n"
                   "    measurements\n") != std::string::npos);
  CHECK(text->find("communication") == text->rfind("communication"));
}

TEST_CASE("a case's held-out curve is stored, shown and exported as eval_curve") {
  auto store = std::move(OpenStore(":memory:")).value();
  RunRecord run;
  run.plan_name = "quickstart";
  run.status = "ok";
  const int64_t id = *store->CreateRun(run);
  CaseRecord c;
  c.run_id = id;
  c.case_id = "q.1";
  c.model = "tiny";
  c.workload = "pretrain";
  c.backend = "fsdp";
  c.system = "fsdp";
  c.length_unit = "steps";
  c.length_count = 4;
  CaseResult ok;
  ok.measurements = {{"wall_seconds", 3.25, "s", Provenance::kMeasured, "", "", ""}};
  ok.eval_curve = {{0, 0, 0.0, 6.5}, {2, 256, 1.25, 5.75}, {4, 512, 2.5, 5.125}};
  const int64_t row = *store->BeginCase(c);
  REQUIRE(store->FinishCase(row, ok).ok());
  auto back = store->EvalCurveOfCase(row);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 3);
  CHECK((*back)[1].step == 2);
  CHECK((*back)[1].tokens == 256);
  CHECK((*back)[1].training_seconds == 1.25);
  CHECK((*back)[2].loss == 5.125);

  auto text = RenderRunDetails(*store, id, false);
  REQUIRE(text.ok());
  INFO(*text);
  CHECK(text->find("    held-out curve (training seconds exclude the evaluations)\n"
                   "      step  tokens  training s    loss\n"
                   "         0       0       0.000  6.5000\n"
                   "         2     256       1.250  5.7500\n"
                   "         4     512       2.500  5.1250\n") != std::string::npos);
  auto json = RenderRunDetails(*store, id, true);
  REQUIRE(json.ok());
  CHECK(Json::parse(*json)["cases"][0]["eval_curve"].dump() ==
        R"([{"step":0,"tokens":0,"training_seconds":0.0,"loss":6.5},)"
        R"({"step":2,"tokens":256,"training_seconds":1.25,"loss":5.75},)"
        R"({"step":4,"tokens":512,"training_seconds":2.5,"loss":5.125}])");
}

TEST_CASE("a case's hardware samples are stored in batches, summed up by show, exported in json and telemetry-csv") {
  auto store = std::move(OpenStore(":memory:")).value();
  RunRecord run;
  run.plan_name = "quickstart";
  const int64_t id = *store->CreateRun(run);
  CaseRecord c;
  c.run_id = id;
  c.case_id = "q.1";
  c.system = "fsdp";
  const int64_t row = *store->BeginCase(c);
  // One batch while the case runs, the rest when it is stored.
  REQUIRE(store->AppendTelemetry(row, {{0.0, "", "gpu0", quantity::kGpuPower, 300.0},
                                       {0.0, "", "gpu0", quantity::kGpuUtilization, 80.0}})
              .ok());
  CaseResult ok;
  ok.samples = {{1.0, "", "gpu0", quantity::kGpuPower, 310.0},
                {1.0, "", "gpu0", quantity::kGpuUtilization, 100.0},
                {1.5, "rig1", "eth0", quantity::kNetSent, 4096.0}};
  REQUIRE(store->FinishCase(row, ok).ok());
  auto back = store->TelemetryOfCase(row);
  REQUIRE(back.ok());
  REQUIRE(back->size() == 5);
  CHECK((*back)[2].seconds == 1.0);
  CHECK((*back)[2].value == 310.0);
  CHECK((*back)[4].node == "rig1");
  CHECK((*back)[4].device == "eth0");
  CHECK((*back)[4].quantity == quantity::kNetSent);

  auto text = RenderRunDetails(*store, id, false);
  REQUIRE(text.ok());
  INFO(*text);
  CHECK(text->find("    samples  0 steps, 0 requests, 5 hardware samples\n") != std::string::npos);
  CHECK(text->find("    hardware samples (every reading: export --format json or telemetry-csv)\n"
                   "      node       device  quantity                 readings  from s  to s  mean  least  largest  unit\n"
                   "      rig1       eth0    net_sent_bytes                  1     1.5   1.5  4096   4096     4096  bytes\n"
                   "      this host  gpu0    gpu_power_watts                 2     0.0   1.0   305    300      310  W\n"
                   "      this host  gpu0    gpu_utilization_percent         2     0.0   1.0    90     80      100  %\n") !=
        std::string::npos);
  auto json = RenderRunDetails(*store, id, true);
  REQUIRE(json.ok());
  CHECK(Json::parse(*json)["cases"][0]["telemetry"][4].dump() ==
        R"({"seconds":1.5,"node":"rig1","device":"eth0","quantity":"net_sent_bytes","value":4096.0,"unit":"bytes"})");
  auto csv = ExportStore(*store, "telemetry-csv");
  REQUIRE(csv.ok());
  CHECK(*csv ==
        "run_id,case_id,repeat,system,seconds,node,device,quantity,value,unit\r\n"
        "1,q.1,0,fsdp,0,,gpu0,gpu_power_watts,300,W\r\n"
        "1,q.1,0,fsdp,0,,gpu0,gpu_utilization_percent,80,%\r\n"
        "1,q.1,0,fsdp,1,,gpu0,gpu_power_watts,310,W\r\n"
        "1,q.1,0,fsdp,1,,gpu0,gpu_utilization_percent,100,%\r\n"
        "1,q.1,0,fsdp,1.5,rig1,eth0,net_sent_bytes,4096,bytes\r\n");
}

TEST_CASE("RenderRunDetails of a missing run is not found") {
  auto store = SmallStore();
  auto text = RenderRunDetails(*store, 9, false);
  CHECK(text.status().code() == Status::Code::kNotFound);
  CHECK(text.status().message() == "run 9 does not exist");
  CHECK(RenderRunDetails(*store, 9, true).status().message() == "run 9 does not exist");
}

TEST_CASE("RenderRunDetails as JSON holds every field and the samples") {
  auto store = SmallStore();
  auto text = RenderRunDetails(*store, 1, true);
  REQUIRE(text.ok());
  Json run = Json::parse(*text);
  CHECK(run["id"] == 1);
  CHECK(run["plan_text"] == "name: methodology\n");
  CHECK(run["git_revision"] == "1234abc");
  CHECK(run["context"].dump() == R"({"host":"rig0","cuda":"12.2"})");
  REQUIRE(run["cases"].size() == 3);
  const Json& first = run["cases"][0];
  CHECK(first["case_id"] == "2.1.1.1");
  CHECK(first["report_as_count"] == 1000);
  CHECK(first["exit_code"] == 0);
  CHECK(first["measurements"][1].dump() ==
        R"({"name":"wall_seconds","value":3605.0,"unit":"s","how":"extrapolated",)"
        R"("method":"x10 from 100 steps","source":"","marker":"","at_length_unit":"","at_length_count":0,"rank":null})");
  CHECK(first["steps"].dump() ==
        R"([{"step":1,"seconds":3.5,"loss":2.5,"tokens":1024},)"
        R"({"step":2,"seconds":3.25,"loss":null,"tokens":null}])");
  const Json& second = run["cases"][1];
  CHECK(second["status"] == "failed");
  CHECK(second["reason"] == "CUDA out of memory");
  CHECK(second["requests"].dump() ==
        R"([{"index":0,"max_new_tokens":100,"prompt_tokens":17,"generated_tokens":100,)"
        R"("seconds":4.5,"answer":"Perhaps.","token_ids":[3,1,4]}])");
  CHECK(run["cases"][2]["exit_code"].is_null());
  CHECK(run["cases"][2]["measurements"].empty());
}

TEST_CASE("ExportStore csv: one row per measurement, RFC 4180 quoting, no case dropped") {
  auto store = SmallStore();
  auto csv = ExportStore(*store, "csv");
  REQUIRE(csv.ok());
  // Every column of the cases table (reason, exit code, times, log sha256 included),
  // the run's plan name and sha256, then the measurement.
  CHECK(*csv ==
        "row_id,run_id,kind,plan,plan_sha256,case_id,repeat,stage,model,workload,backend,system,nodes,topology,network,"
        "variant,length_unit,length_count,report_as_unit,report_as_count,status,reason,exit_code,started_at,finished_at,"
        "log_path,log_sha256,name,value,unit,how,method,source,marker,at_length_unit,at_length_count,rank\r\n"
        "1,1,run,methodology,ab12,2.1.1.1,0,open source,llama2-70b,pretrain,fsdp,fsdp,1,,,,steps,100,steps,1000,ok,,0,"
        "2024-05-01T10:00:00Z,2024-05-01T11:00:00Z,logs/1/2.1.1.1.log,,wall_seconds,360.5,s,measured,,,,,,\r\n"
        "1,1,run,methodology,ab12,2.1.1.1,0,open source,llama2-70b,pretrain,fsdp,fsdp,1,,,,steps,100,steps,1000,ok,,0,"
        "2024-05-01T10:00:00Z,2024-05-01T11:00:00Z,logs/1/2.1.1.1.log,,wall_seconds,3605,s,extrapolated,x10 from 100 steps,,,,,\r\n"
        "2,1,run,methodology,ab12,2.1.1.5,0,open source,llama2-70b,inference,fsdp,fsdp,1,,,,,0,,0,failed,CUDA out of memory,1,"
        "2024-05-01T10:00:00Z,2024-05-01T11:30:00Z,,,wall_seconds,12.25,s,measured,,,,,,\r\n"
        "3,1,run,methodology,ab12,2.2.1.1,0,open source,llama2-70b,pretrain,share,share,2,rig0:2x4 rig1:2x4,10G,,,0,,0,skipped,"
        "excluded by --only,,2024-05-01T10:00:00Z,,,,,,,,,,,,,\r\n"
        "4,2,import,published,,2.1.1.2,0,,llama2-70b,pretrain,import,fsdp,2,,\"IB Conn, other cloud\",,steps,100,,0,ok,,,,,,,"
        "wall_seconds,,min,imported,,\"paper, \"\"table 2\"\"\nrow 3\",not-provided,,,\r\n"
        "4,2,import,published,,2.1.1.2,0,,llama2-70b,pretrain,import,fsdp,2,,\"IB Conn, other cloud\",,steps,100,,0,ok,,,,,,,"
        "wall_seconds,61.5,min,imported,,paper,extrapolated,,,\r\n");
}

TEST_CASE("ExportStore: a rank's own figure is exported under its name with its rank apart") {
  auto store = std::move(OpenStore(":memory:")).value();
  testing::StoreCaseWith(*store,
                         {{"exit_code_rank1", 137.0, "", Provenance::kMeasured, "rank 1 was ended by signal 9", "", ""},
                          {"wall_seconds", 2.0, "s", Provenance::kMeasured, "", "", ""}});
  const Json doc = Json::parse(*ExportStore(*store, "json"));
  const Json& ms = doc["runs"][0]["cases"][0]["measurements"];
  CHECK(ms[0]["name"] == "exit_code");
  CHECK(ms[0]["rank"] == 1);
  CHECK(ms[1]["name"] == "wall_seconds");
  CHECK(ms[1]["rank"].is_null());
  const std::string csv = *ExportStore(*store, "csv");
  CHECK(csv.find(",exit_code,137,,measured,rank 1 was ended by signal 9,,,,,1\r\n") != std::string::npos);
  CHECK(csv.find(",wall_seconds,2,s,measured,,,,,,\r\n") != std::string::npos);
}

TEST_CASE("CsvField quotes commas, quotes, CR and LF and nothing else") {
  CHECK(CsvField("plain text") == "plain text");
  CHECK(CsvField("") == "");
  CHECK(CsvField("a,b") == "\"a,b\"");
  CHECK(CsvField("say \"hi\"") == "\"say \"\"hi\"\"\"");
  CHECK(CsvField("two\nlines") == "\"two\nlines\"");
  CHECK(CsvField("cr\rhere") == "\"cr\rhere\"");
}

TEST_CASE("ExportStore json parses back to the stored data") {
  auto store = SmallStore();
  auto text = ExportStore(*store, "json");
  REQUIRE(text.ok());
  Json doc = Json::parse(*text);
  CHECK(doc["schema_version"] == StoreSchemaVersion());
  REQUIRE(doc["runs"].size() == 2);
  const Json& imp = doc["runs"][1];
  CHECK(imp["kind"] == "import");
  CHECK(imp["source"] == "paper, \"table 2\"");
  REQUIRE(imp["cases"].size() == 1);
  const Json& m = imp["cases"][0]["measurements"][0];
  CHECK(m["value"].is_null());
  CHECK(m["source"] == "paper, \"table 2\"\nrow 3");
  CHECK(m["marker"] == "not-provided");
  CHECK(imp["cases"][0]["measurements"][1]["value"] == 61.5);
  // The run objects are the same as `show --json` prints.
  CHECK(doc["runs"][0] == Json::parse(*RenderRunDetails(*store, 1, true)));
}

TEST_CASE("ExportStore of an empty store has the schema version and no runs") {
  auto store = std::move(OpenStore(":memory:")).value();
  auto json = ExportStore(*store, "json");
  REQUIRE(json.ok());
  CHECK(Json::parse(*json).dump() ==
        fmt::format(R"({{"schema_version":{},"runs":[]}})", StoreSchemaVersion()));
  CHECK(*ExportStore(*store, "csv") ==
        "row_id,run_id,kind,plan,plan_sha256,case_id,repeat,stage,model,workload,backend,system,nodes,topology,network,"
        "variant,length_unit,length_count,report_as_unit,report_as_count,status,reason,exit_code,started_at,finished_at,"
        "log_path,log_sha256,name,value,unit,how,method,source,marker,at_length_unit,at_length_count,rank\r\n");
}

TEST_CASE("ExportStore refuses an unknown format, suggesting a near one") {
  auto store = std::move(OpenStore(":memory:")).value();
  auto xml = ExportStore(*store, "xml");
  CHECK(xml.status().code() == Status::Code::kInvalidArgument);
  CHECK(xml.status().message() == "unknown export format 'xml' (expected json, csv or telemetry-csv)");
  CHECK(ExportStore(*store, "jsn").status().message() ==
        "unknown export format 'jsn' (did you mean 'json'?)");
}
