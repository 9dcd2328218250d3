#include "backends/native/case/case_setup.h"

#include <utility>

#include "backends/native/case/case_device.h"
#include "backends/native/model/model_resolve.h"

namespace protocol {
namespace native {

void CaseSetup::AddNote(const std::string& text) {
  if (text.empty()) return;
  method_note = method_note.empty() ? text : method_note + "; " + text;
}

Result<CaseSetup> ResolveCaseSetup(const WorkerCase& wc, int local_rank) {
  Result<ResolvedModel> model = ResolveModel(wc.model_name, wc.model_preset, wc.model_path);
  if (!model.ok()) return model.status();
  CaseSetup s;
  s.config = model->config;
  s.config_source = model->config_source;
  s.tokenizer_path = model->tokenizer_path;
  s.tokenizer = std::move(model->tokenizer);
  // More ranks than GPUs on a node (inference replicas may share them): local rank mod the GPUs.
  auto device = ResolveCaseDevice(wc.training.device, local_rank);
  if (!device.ok()) return device.status();
  s.device = device->device;
  s.dtype = device->dtype;
  return s;
}

}  // namespace native
}  // namespace protocol
