#ifndef PROTOCOL_REPORT_REPORT_OPTIONS_H_
#define PROTOCOL_REPORT_REPORT_OPTIONS_H_

// What a report covers and sets against what: the options the report's flags
// set (docs/cli.md), read by every step from collecting to rendering and
// written in a report's comment (verify.h).

#include <cstdint>
#include <string>
#include <vector>

#include "runner/plan/plan.h"  // kHybridFsdpSystem

namespace protocol {

struct ReportOptions {
  std::vector<int64_t> run_ids;  // empty: every run in the store (newest result per cell wins)
  std::string model;             // empty: every model
  std::string baseline_system = "fsdp";
  std::string candidate_system = "share";
  // Further baseline systems (docs/report.md, "Against each baseline"): each
  // has its training results set against the candidate's in a table of its
  // own, beside the methodology's baseline (whose own table does not
  // change). Default: PyTorch FSDP's HYBRID_SHARD, the best configuration
  // its users could run on a slow inter-node link. A name equal to the
  // baseline or the candidate system is ignored; empty: no such table.
  std::vector<std::string> further_baselines = {kHybridFsdpSystem};
  // History charts cover every stored run with id <= history_through (0: all
  // of them), whatever run_ids selects; fixed in a report's comment so that
  // later runs do not change what it re-renders to (verify.h).
  int64_t history_through = 0;
  // false: no history charts (nor their reading): BuildReport sets it for a
  // format that shows none (FormatShowsHistory).
  bool history = true;
};

// The further baselines a report sets against the candidate: the names of
// options.further_baselines in order, without empty ones, repeats, the
// baseline and the candidate system.
std::vector<std::string> FurtherBaselines(const ReportOptions& options);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_REPORT_OPTIONS_H_
