#ifndef PROTOCOL_RUNNER_PLAN_COVERAGE_H_
#define PROTOCOL_RUNNER_PLAN_COVERAGE_H_

// Which cells of the report's training tables a plan will fill, before it
// runs (`protocol validate`), by the report's own layout (docs/report.md):
// one table per model; rows workload × length; columns system × nodes ×
// network × variant, by node count, the baseline before the candidate.
//
// A training case of the baseline or candidate system fills
//   its own length                     measured
//   each report_as length below it     computed from its first steps (`*`)
//   each report_as length above it     extrapolated (`*`)
//   each not_provided length           declared not provided (`X`)
// A cell no case fills is empty (`–`), with the reason.

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "runner/plan/plan.h"

namespace protocol {

// The systems of the report's baseline and candidate columns unless told
// otherwise (`protocol report --baseline-system/--candidate-system`).
inline constexpr const char* kBaselineSystem = "fsdp";
inline constexpr const char* kCandidateSystem = "share";
// The further baseline a report sets against the candidate unless told
// otherwise (`protocol report --further-baseline`): PyTorch FSDP's
// HYBRID_SHARD, beside the methodology's baseline.
inline constexpr const char* kFurtherBaselineSystem = kHybridFsdpSystem;

enum class CellFill { kMeasured, kPrefix, kExtrapolated, kNotProvided };

// "1 node", "2 nodes": how tables, sentences and validate name a node count.
std::string NodesText(int nodes);

// A column of a training table.
struct TableColumn {
  std::string system;
  int nodes = 1;
  std::string network;
  std::string variant;
  std::string label;  // "fsdp 2 nodes (80G)", "share 1 node [exact]"
  bool operator==(const TableColumn& o) const {
    return system == o.system && nodes == o.nodes && network == o.network && variant == o.variant;
  }
};

// The report's columns for the given (system, nodes, network, variant)
// combinations (labels filled in): by node count, `baseline` first, then the
// `further` baselines in their order, then the others (the candidate), each
// by network and variant; the network is named for a baseline (the
// methodology's or a further one) on several nodes and wherever one system
// has several on a node count.
std::vector<TableColumn> TrainingColumnsOf(std::vector<TableColumn> combinations, const std::string& baseline,
                                           const std::vector<std::string>& further = {});

struct CoverageCell {
  std::optional<CellFill> fill;  // nullopt: empty
  std::string case_id;           // the case that fills it
  std::string why_empty;         // for an empty cell
};

struct CoverageRow {
  std::string workload;  // "pretrain" | "finetune"
  Length length;
  std::string Label() const;  // "pretrain 1000 steps"
  std::vector<CoverageCell> cells;  // one per column
};

struct CoverageTable {
  std::string model;
  std::vector<TableColumn> columns;
  std::vector<CoverageRow> rows;  // pretrain before finetune, steps before epochs, longest first
};

// One table per model with training cases of `baseline`, a `further`
// baseline or `candidate`, in the order the models' first cases appear; a
// further baseline's columns follow the baseline's (TrainingColumnsOf).
std::vector<CoverageTable> TrainingCoverage(const Plan& plan, const std::string& baseline,
                                            const std::string& candidate,
                                            const std::vector<std::string>& further = {});

// The tables as `protocol validate` prints them, then one line per empty cell
// with its reason.
std::string RenderCoverage(const std::vector<CoverageTable>& tables);

// What a case computes on, as its backend lays it out: compared between the
// two sides of a row so that a ratio compares like with like.
struct CaseResources {
  int processes = 1;     // rank processes (1: one process)
  int nodes = 1;
  std::string devices;   // "16 GPUs", "2 CPU threads"
  std::string Text() const;  // "2 ranks on 1 node, 2 CPU threads"
};
using ResourcesOf = std::function<std::optional<CaseResources>(const CaseSpec&)>;

// One warning per pair of cases that fill a baseline cell (the methodology's
// or a further baseline's: every column not of `candidate`) and a candidate
// cell of a row on the same node count with different processes or devices:
// "pretrain 1000 steps, 1 node: fsdp (case 2.1.1.1) runs 1 rank on 1 node, 2
// CPU threads; share (case 2.2.1.1) runs 2 ranks on 1 node, 2 CPU threads: the
// two sides of the ratio differ in ranks". Cases `resources` knows nothing of
// are not compared. Each warning comes with the candidate case's id (where
// validate locates it).
std::vector<std::pair<std::string, std::string>> UnequalSides(const Plan& plan, const std::vector<CoverageTable>& tables,
                                                              const std::string& candidate,
                                                              const ResourcesOf& resources);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_COVERAGE_H_
