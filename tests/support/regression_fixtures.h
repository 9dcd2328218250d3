#ifndef PROTOCOL_TESTS_REGRESSION_FIXTURES_H_
#define PROTOCOL_TESTS_REGRESSION_FIXTURES_H_

// Helpers for the nightly-regression tests (compare, junit, reference_check,
// verify): a loader of stored-run fixtures (tests/data/compare/*.json, format
// described in nightly.json's comments) into a Store, a temporary directory,
// and a runner of the real `protocol` binary.

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runner/base/json.h"
#include "runner/store/store.h"
#include "cli_support.h"  // Protocol: runs the program
#include "test_files.h"

namespace protocol {
namespace testing {

inline std::string ReadText(const std::filesystem::path& path) { return ReadTextFile(path.string()); }

inline void WriteText(const std::filesystem::path& path, const std::string& text) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::string FixturePath(const std::string& name) {
  return std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/compare/" + name;
}

// Loads every run of a fixture file into `store`, in order; one case row per
// value of "wall_seconds" (the repeats). REQUIRES: the fixture is well formed.
inline void LoadRunsFixture(Store& store, const std::string& name) {
  Json root = Json::parse(ReadText(FixturePath(name)));
  for (const Json& r : root["runs"]) {
    RunRecord run;
    run.plan_name = r.value("plan", "nightly");
    run.plan_title = run.plan_name;
    run.plan_file = "plans/" + run.plan_name + ".yaml";
    run.plan_text = "name: " + run.plan_name + "\n";
    run.plan_sha256 = std::string(64, 'a');
    run.started_at = "2024-05-01T00:00:00Z";
    run.finished_at = "2024-05-01T01:00:00Z";
    run.status = "ok";
    auto id = store.CreateRun(run);
    REQUIRE(id.ok());
    std::vector<std::pair<std::string, std::string>> facts;
    if (r.contains("context"))
      for (const auto& [k, v] : r["context"].items()) facts.emplace_back(k, v.get<std::string>());
    REQUIRE(store.PutContext(*id, facts).ok());
    for (const Json& c : r["cases"]) {
      const Json& walls = c["wall_seconds"];
      for (size_t k = 0; k < walls.size(); ++k) {
        CaseRecord rec;
        rec.run_id = *id;
        rec.case_id = c["id"].get<std::string>();
        rec.repeat = static_cast<int>(k);
        rec.stage = c.value("stage", "stage1");
        rec.model = c["model"].get<std::string>();
        rec.workload = c["workload"].get<std::string>();
        rec.backend = c["backend"].get<std::string>();
        rec.system = c["system"].get<std::string>();
        rec.nodes = c.value("nodes", 1);
        rec.topology = c.value("topology", "");
        if (c.contains("steps")) {
          rec.length_unit = "steps";
          rec.length_count = c["steps"].get<int64_t>();
        }
        rec.started_at = "2024-05-01T00:00:00Z";
        rec.log_path = "/tmp/none.log";
        auto row = store.BeginCase(rec);
        REQUIRE(row.ok());
        CaseResult result;
        result.status = *ParseCaseStatus(c.value("status", "ok"));
        result.reason = c.value("reason", "");
        result.finished_at = "2024-05-01T00:10:00Z";
        result.measurements.push_back({"wall_seconds", walls[k].get<double>(), "s",
                                       Provenance::kMeasured, "", "", ""});
        if (c.contains("tokens_per_second"))
          result.measurements.push_back({"tokens_per_second",
                                         c["tokens_per_second"][k].get<double>(), "tokens/s",
                                         Provenance::kMeasured, "", "", ""});
        REQUIRE(store.FinishCase(*row, result).ok());
      }
    }
  }
}

}  // namespace testing
}  // namespace protocol

#endif  // PROTOCOL_TESTS_REGRESSION_FIXTURES_H_
