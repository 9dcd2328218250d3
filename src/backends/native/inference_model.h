#ifndef PROTOCOL_BACKENDS_NATIVE_INFERENCE_MODEL_H_
#define PROTOCOL_BACKENDS_NATIVE_INFERENCE_MODEL_H_

// The model an inference case serves from, built one way for the one process
// and for a replica's leader: created over `devices` (placed balanced, whole
// layers, where there are several: placement.h), with the case's weights
// (case_weights.h; a 4-bit model's projections quantized as they are read),
// and a 4-bit model prepared for decoding (nf4_prepare_inference). The notes
// of the weights and of the 4-bit serving are added to the setup, for every
// figure of the case.

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "backends/native/case/case_setup.h"
#include "backends/native/case/case_weights.h"
#include "backends/native/launch/worker_case.h"
#include "backends/native/model/model.h"
#include "backends/native/model/placement.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

struct InferenceModel {
  Model model;
  LayerPlacement placement;  // devices > 1: spread over that many
  CaseWeights weights;       // where they came from
  std::string nf4_serving;   // a 4-bit model: how it is served (nf4_prepare_inference); "" otherwise
};

// REQUIRES: devices non-empty, devices.front() == setup.device. Errors: no
// weights to load (the rule Check applied first), a file that cannot be read.
Result<InferenceModel> LoadInferenceModel(const WorkerCase& wc, CaseSetup& setup,
                                          const std::vector<at::Device>& devices);

// "11/11/10": the decoder layers on each device, for the logs.
std::string DeviceLayersText(const LayerPlacement& placement);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_INFERENCE_MODEL_H_
