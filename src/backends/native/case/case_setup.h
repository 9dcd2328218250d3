#ifndef PROTOCOL_BACKENDS_NATIVE_CASE_CASE_SETUP_H_
#define PROTOCOL_BACKENDS_NATIVE_CASE_CASE_SETUP_H_

// What every process of a native case resolves before its work, the same for
// the one-process backend and for each rank: the model's dimensions and
// tokenizer (model_resolve.h), the device and compute dtype (case_device.h),
// and the note that every figure of the case carries about what ran
// (declared random weights, 4-bit, QLoRA).

#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "backends/native/launch/worker_case.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/tokenizer.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct CaseSetup {
  ModelConfig config;
  std::string config_source;  // ResolvedModel::config_source
  std::unique_ptr<Tokenizer> tokenizer;
  std::string tokenizer_path;
  at::Device device = at::kCPU;
  at::ScalarType dtype = at::kFloat;
  // What every figure of the case says about what ran, parts joined by "; "
  // in the order they were added: the weights' note, then the 4-bit method.
  std::string method_note;
  void AddNote(const std::string& text);
};

// `local_rank`: the process's index among the case's processes on its node
// (the one process: 0, so cuda:0). Errors: the model's (ResolveModel) and the
// device's (ResolveCaseDevice).
Result<CaseSetup> ResolveCaseSetup(const WorkerCase& wc, int local_rank);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_CASE_CASE_SETUP_H_
