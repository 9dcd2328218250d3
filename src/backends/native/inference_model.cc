#include "backends/native/inference_model.h"

#include <utility>

#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/quant/quantized_model.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

Result<InferenceModel> LoadInferenceModel(const WorkerCase& wc, CaseSetup& setup,
                                          const std::vector<at::Device>& devices) {
  const bool nf4 = wc.quantization == Quantization::kNf4;
  const LayerPlacement placement = inference_placement(setup.config, c10::elementSize(setup.dtype), nf4,
                                                       wc.double_quant, static_cast<int>(devices.size()));
  // A 4-bit model is created without its projections: each is read, quantized and freed in turn.
  const ProjectionTensors projections = CaseProjectionTensors(nf4);
  Model model = placement.devices > 1
                    ? model_create_placed(setup.config, setup.dtype, devices, placement, projections)
                    : model_create(setup.config, at::TensorOptions().dtype(setup.dtype).device(setup.device),
                                   projections);
  auto weights = DecideWeights(wc.workload, nf4, wc.init_random, wc.model_path, wc.training.seed, wc.model_name);
  if (!weights.ok()) return weights.status();  // Check refused it first: never run on weights nobody asked for
  if (Status s = nf4 ? LoadOrInitNf4Weights(model, *weights, wc.model_path, wc.training.seed, wc.double_quant)
                     : LoadOrInitWeights(model, *weights, wc.model_path, wc.training.seed);
      !s.ok())
    return s;
  setup.AddNote(weights->note);
  InferenceModel out{std::move(model), placement, *weights, ""};
  if (nf4) {
    out.nf4_serving = nf4_prepare_inference(out.model, setup.device, setup.dtype, wc.double_quant);
    setup.AddNote(out.nf4_serving);
  }
  return out;
}

std::string DeviceLayersText(const LayerPlacement& placement) {
  std::vector<std::string> counts;
  for (int n : placement.device_layers) counts.push_back(std::to_string(n));
  return Join(counts, "/");
}

}  // namespace native
}  // namespace protocol
