#ifndef PROTOCOL_BACKENDS_NATIVE_CHECK_NATIVE_CHECK_H_
#define PROTOCOL_BACKENDS_NATIVE_CHECK_NATIVE_CHECK_H_

// Plan rules of the native backends (`fsdp`, `share`) shared by their Check,
// Advise and Run, so that what `protocol validate` reports and what a run
// refuses come from one function and cannot disagree:
//
//   native_case_issues   every issue of a case, each of one kind:
//     kError    the plan asks for something the backend cannot do (Check's
//               problems: validate fails, the runner does not start the case)
//     kRefusal  this build refuses the case when it runs (validate warns "a
//               run fails: ..."; Run stores a failed case with the message and
//               runs nothing)
//     kUnchecked what the case needs cannot be checked on this machine (a
//               model path that is not here): validate warns; Run refuses on
//               a machine where it still does not hold
//     kNote     not a problem, what validate says besides (a model that an
//               earlier case of the plan writes)
//   native_run_refusal   what Run stores: the first error or refusal
//   native_case_memory   validate's memory note (memory_estimate.h for the
//               plan's cluster) and its warning when the expected peak
//               exceeds the device memory the plan states
//
// No libtorch here: validate runs on machines without the model or a GPU.
// The filesystem is read (a model's config.json and weights, a parquet
// dataset's footers) where the rule needs it; a path that is not on this
// machine is reported as such.

#include <optional>
#include <string>
#include <vector>

#include "backends/native/launch/native_role.h"
#include "backends/native/case/weights_source.h"
#include "runner/exec/backend.h"
#include "runner/plan/coverage.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

// kNote: not a problem but what validate should say (a model written by an
// earlier case of the plan).
enum class CaseIssueKind { kError, kRefusal, kUnchecked, kNote };
struct CaseIssue {
  CaseIssueKind kind = CaseIssueKind::kError;
  std::string message;  // no location, no trailing "nothing was run"
};

std::vector<CaseIssue> native_case_issues(const Plan& plan, const CaseSpec& spec, NativeRole role);

// The message of the first issue (of any kind); empty when the case runs.
std::string native_run_refusal(const Plan& plan, const CaseSpec& spec, NativeRole role);

// Notes: one line with the expected peak memory per device (GPU) or per rank
// process (CPU) and its terms, against the stated GPU memory with whether the
// case fits ("9.89 GB of 24 GB (fits)", "(does not fit)"); warnings: the peak exceeds the stated
// cluster.nodes[].gpu_memory_gb. Nothing when the model's dimensions are
// unknown (no preset, no readable config.json).
CaseAdvice native_case_memory(const Plan& plan, const CaseSpec& spec, NativeRole role);
// training.checkpoint_every of a case as it runs: the plan's k, or for `auto`
// 0 (no layer recomputed) when the case's expected peak without recompute
// fits the memory it runs in, else 1 (every layer). The memory: 90 % of the
// smallest stated cluster.nodes[].gpu_memory_gb on GPUs (the rest for the
// CUDA context and the allocator's fragmentation; not stated: 1); on CPUs
// half of this host's physical memory shared by the case's rank processes on
// its busiest host (the host also holds the runner, the libraries and the
// page cache). `why` says which and why for `auto` ("" otherwise);
// inference cases: 0. The worker case carries the resolved value
// (dist_backend.h WorkerCaseOf), so the figures say what ran.
struct CheckpointChoice {
  int64_t every = 1;
  std::string why;
};
CheckpointChoice native_case_checkpointing(const Plan& plan, const CaseSpec& spec, NativeRole role);
// The same expected peak in a few words, "71.2 GB per GPU" or "1.2 GB per
// rank process"; "" when it cannot be estimated (for a failure's reason).
std::string native_case_expected_memory(const Plan& plan, const CaseSpec& spec, NativeRole role);

// A two-node (or more) training case: what crosses between the nodes, by
// traffic.h's formulas: fsdp per step, with the other sharding's figure
// beside it; share per merge. "" otherwise.
std::string native_case_traffic(const Plan& plan, const CaseSpec& spec, NativeRole role);

// The expected wall time of one repeat (time_estimate.h) on the plan's
// devices: a GPU node's cluster.nodes[].gpu_model row of the device table
// (its gpu_mfu, else the assumed MFU); CPU hosts from `host`, this host's
// calibration, when every node of the case is this host, else the assumed CPU
// figures. Its why_not says why when it cannot be estimated (a GPU node
// without gpu_model, a length in epochs, unknown dimensions).
TimeEstimate native_case_time(const Plan& plan, const CaseSpec& spec, NativeRole role,
                              const std::optional<HostCalibration>& host);

// What the case computes on (coverage.h): its rank processes, its nodes, and
// its devices — "16 GPUs" on GPUs, else "2 CPU threads per host" or "every CPU
// thread of each host" (training.threads, split over the ranks on a host). nullopt when its layout is invalid.
std::optional<CaseResources> native_case_resources(const Plan& plan, const CaseSpec& spec, NativeRole role);

// A multi-node case's network for validate: its label, nominal rate, each
// node's address on it and the environment its ranks get (secrets masked);
// "" for a one-node case.
std::string native_case_network(const Plan& plan, const CaseSpec& spec);

// Validate's warning for a multi-node case whose row (same workload, model,
// node count and length) has an earlier case of another system on another
// network, unless cluster.compare_across_networks says that is the
// comparison; "" otherwise.
std::string native_network_mismatch(const Plan& plan, const CaseSpec& spec);

// Check's errors and Advise's warnings + notes of a case, from the functions above.
std::vector<std::string> native_check_errors(const Plan& plan, const CaseSpec& spec, NativeRole role);
CaseAdvice native_advise(const Plan& plan, const CaseSpec& spec, NativeRole role);

// An upper bound of the tokens of a prompt of `bytes` UTF-8 bytes with a
// SentencePiece tokenizer: every piece covers at least one byte, plus BOS and
// the dummy-prefix space: bytes + 2.
int64_t prompt_token_bound(const std::string& prompt);

}  // namespace native

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CHECK_NATIVE_CHECK_H_
