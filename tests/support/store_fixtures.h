#ifndef PROTOCOL_TESTS_STORE_FIXTURES_H_
#define PROTOCOL_TESTS_STORE_FIXTURES_H_

// Records with every field set, field-by-field comparisons and a temporary
// directory, shared by the Store contract suite (store_contract_test.cc) and
// the SQLite-only tests (store_test.cc).

#include <doctest/doctest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "runner/base/text.h"
#include "runner/store/records.h"
#include "runner/store/store.h"

namespace protocol::testing {

// A fresh directory under the system temp dir, removed with everything in it.
class StoreTempDir {
 public:
  StoreTempDir() {
    static std::atomic<int> counter{0};
    path_ = std::filesystem::temp_directory_path() /
            fmt::format("protocol_store_test_{}_{}", getpid(), counter++);
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~StoreTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string File(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

inline RunRecord FullRun() {
  RunRecord r;
  r.kind = "import";
  r.plan_name = "methodology";
  r.plan_title = "Share protocol vs FSDP, \"8 x H100\"";
  r.plan_file = "plans/methodology.yaml";
  r.plan_text = "name: methodology\ncases:\n  - id: 2.1.1.1\n";
  r.plan_sha256 = "ab12cd34";
  r.source = "published table, page 3";
  r.started_at = "2024-05-01T10:00:00Z";
  r.finished_at = "2024-05-01T12:30:00Z";
  r.status = "ok";
  r.protocol_version = "0.1.0";
  r.git_revision = "1234abcd-dirty";
  return r;
}

// A run of plan quickstart stored in `store`, for tests of one run's details; its id.
inline int64_t CreateQuickstartRun(Store& store) {
  RunRecord run;
  run.plan_name = "quickstart";
  run.started_at = "2024-05-01T10:00:00Z";
  run.status = "ok";
  return *store.CreateRun(run);
}

// A finished pretrain case "d.1" of a new run of plan "p" in `store`, with
// `measurements`; its case row.
inline int64_t StoreCaseWith(Store& store, std::vector<Measurement> measurements) {
  RunRecord run;
  run.plan_name = "p";
  run.status = "ok";
  CaseRecord c;
  c.run_id = *store.CreateRun(run);
  c.case_id = "d.1";
  c.workload = "pretrain";
  const int64_t row = *store.BeginCase(c);
  CaseResult result;
  result.measurements = std::move(measurements);
  REQUIRE(store.FinishCase(row, result).ok());
  return row;
}

// A 2-node pretrain of model tiny, 12 steps, of run `run_id`, as system `system` reports it.
inline CaseRecord TwoNodeTinyPretrain(int64_t run_id, const std::string& case_id, const std::string& system) {
  CaseRecord c;
  c.run_id = run_id;
  c.case_id = case_id;
  c.model = "tiny";
  c.workload = "pretrain";
  c.backend = "fsdp";
  c.system = system;
  c.nodes = 2;
  c.length_unit = "steps";
  c.length_count = 12;
  return c;
}

inline CaseRecord FullCase(int64_t run_id) {
  CaseRecord c;
  c.run_id = run_id;
  c.case_id = "2.2.1.1";
  c.repeat = 2;
  c.stage = "share protocol";
  c.model = "llama2-70b";
  c.workload = "pretrain";
  c.backend = "command";
  c.system = "share";
  c.nodes = 2;
  c.topology = "rig0:2x4 rig1:2x4";
  c.network = "10G";
  c.variant = "opt";
  c.length_unit = "steps";
  c.length_count = 100;
  c.report_as_unit = "steps";
  c.report_as_count = 1000;
  c.status = CaseStatus::kOk;  // ignored by BeginCase
  c.reason = "";
  c.exit_code = 3;
  c.started_at = "2024-05-01T10:01:00Z";
  c.finished_at = "";
  c.log_path = "logs/1/2.2.1.1-2.log";
  return c;
}

inline void CheckSameRun(const RunRecord& a, const RunRecord& b) {
  CHECK(a.kind == b.kind);
  CHECK(a.plan_name == b.plan_name);
  CHECK(a.plan_title == b.plan_title);
  CHECK(a.plan_file == b.plan_file);
  CHECK(a.plan_text == b.plan_text);
  CHECK(a.plan_sha256 == b.plan_sha256);
  CHECK(a.source == b.source);
  CHECK(a.started_at == b.started_at);
  CHECK(a.finished_at == b.finished_at);
  CHECK(a.status == b.status);
  CHECK(a.protocol_version == b.protocol_version);
  CHECK(a.git_revision == b.git_revision);
}

inline void CheckSameCaseIdentity(const CaseRecord& a, const CaseRecord& b) {
  CHECK(a.run_id == b.run_id);
  CHECK(a.case_id == b.case_id);
  CHECK(a.repeat == b.repeat);
  CHECK(a.stage == b.stage);
  CHECK(a.model == b.model);
  CHECK(a.workload == b.workload);
  CHECK(a.backend == b.backend);
  CHECK(a.system == b.system);
  CHECK(a.nodes == b.nodes);
  CHECK(a.topology == b.topology);
  CHECK(a.network == b.network);
  CHECK(a.variant == b.variant);
  CHECK(a.length_unit == b.length_unit);
  CHECK(a.length_count == b.length_count);
  CHECK(a.report_as_unit == b.report_as_unit);
  CHECK(a.report_as_count == b.report_as_count);
  CHECK(a.started_at == b.started_at);
  CHECK(a.log_path == b.log_path);
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_STORE_FIXTURES_H_
