#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_WORKER_CASE_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_WORKER_CASE_H_

// The case file: what the runner's backend hands to every `protocol worker`
// rank of one distributed case (JSON, written once into the case's work
// directory). It is self-contained — input paths already resolved against the
// plan's directory — so a worker never re-reads the plan; the resolved plan
// text and its file are kept in it for the record only.
//
// Layout: ranks 0..world−1; rank r belongs to group r / group_size and is
// local rank r % group_size in it. The fsdp baseline is one group of all ranks;
// the share protocol is `groups` groups of K = group_size ranks.

#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/launch/native_role.h"
#include "runner/base/status.h"
#include "runner/plan/plan.h"

namespace protocol {
namespace native {

struct WorkerCase {
  NativeRole role = NativeRole::kFsdp;
  std::string case_id;
  std::string plan_file;
  std::string plan_text;  // the resolved plan, for the record
  Workload workload = Workload::kPretrain;
  std::string model_name, model_preset, model_path;  // model_path absolute (or empty)
  Quantization quantization = Quantization::kNone;   // models[].quantization
  bool double_quant = false;                         // models[].double_quant
  bool init_random = false;                          // models[].init: random
  std::string dataset_format, dataset_path;          // training only
  std::string dataset_column;                        // parquet: the text column ("" = text)
  TrainingSettings training;
  int64_t steps = 0;             // training: Length::kSteps count, or 0 with epochs > 0
  int64_t epochs = 0;            // training: Length::kEpochs count
  int warmup_steps = 0;
  InferenceSchedule inference;
  std::string output_dir;        // where rank 0 saves the (merged) model; empty: not saved
  int groups = 1;
  int group_size = 1;
  std::vector<std::string> rank_nodes;  // node name of each rank (size groups·group_size)

  int world() const { return groups * group_size; }
};

std::string EncodeWorkerCase(const WorkerCase& c);  // JSON text
Result<WorkerCase> DecodeWorkerCase(const std::string& text);
Status WriteWorkerCase(const std::string& path, const WorkerCase& c);
Result<WorkerCase> ReadWorkerCase(const std::string& path);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_WORKER_CASE_H_
