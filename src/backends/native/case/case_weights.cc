#include "backends/native/case/case_weights.h"

#include <filesystem>
#include <memory>
#include <utility>

#include "backends/native/model/safetensors.h"
#include "backends/native/quant/quantized_model.h"
#include "runner/base/text.h"
#include "runner/store/records.h"

namespace protocol {
namespace native {
namespace fs = std::filesystem;

WeightsSource native_weights_source(Workload workload, bool nf4, bool init_random, const std::string& path) {
  if (workload == Workload::kPretrain && !nf4) return WeightsSource::kRandomFromScratch;
  if (init_random) return WeightsSource::kRandomDeclared;
  return model_dir_has_weights(path) ? WeightsSource::kPath : WeightsSource::kMissing;
}

std::string native_weights_note(WeightsSource source, int64_t seed) {
  return source == WeightsSource::kRandomDeclared ? fmt::format("{}, seed {})", metric::kRandomWeightsNote, seed) : "";
}

Result<CaseWeights> DecideWeights(Workload workload, bool nf4, bool init_random, const std::string& path,
                                  int64_t seed, const std::string& model_name) {
  CaseWeights w;
  w.source = native_weights_source(workload, nf4, init_random, path);
  if (w.source == WeightsSource::kMissing)
    return Status::InvalidArgument(
        fmt::format("model '{}' has no weights in its path and does not say `init: random`", model_name));
  if (std::string note = native_weights_note(w.source, seed); !note.empty()) w.note = "weights: " + note;
  return w;
}

Status LoadOrInitWeights(Model& model, const CaseWeights& weights, const std::string& path, int64_t seed) {
  if (weights.source == WeightsSource::kPath) return model_load_weights(model, path);
  model_init_random(model, static_cast<uint64_t>(seed));
  return Status::Ok();
}

Result<ParameterFill> CaseWeightsFill(const CaseWeights& weights, const std::string& path, int64_t seed) {
  if (weights.source == WeightsSource::kPath) {
    auto opened = WeightsReader::Open(path);
    if (!opened.ok()) return opened.status();
    auto reader = std::make_shared<WeightsReader>(std::move(*opened));
    return ParameterFill([reader](const std::vector<NamedParameter>& run) -> Status {
      for (const NamedParameter& p : run)
        if (Status s = reader->Read(p); !s.ok()) return s;
      return Status::Ok();
    });
  }
  auto gen = std::make_shared<at::Generator>(init_generator(static_cast<uint64_t>(seed)));
  return ParameterFill([gen](const std::vector<NamedParameter>& run) -> Status {
    parameters_init_random(run, *gen);
    return Status::Ok();
  });
}

ProjectionTensors CaseProjectionTensors(bool nf4) {
  return nf4 ? ProjectionTensors::kLeaveUndefined : ProjectionTensors::kAllocate;
}

Status LoadOrInitNf4Weights(Model& model, const CaseWeights& weights, const std::string& path, int64_t seed,
                            bool double_quant) {
  auto fill = CaseWeightsFill(weights, path, seed);
  if (!fill.ok()) return fill.status();
  return model_fill_nf4(model, *fill, double_quant);
}

Status SaveTrainedWeights(const std::string& dir, const TrainedWeights& what, const std::string& tokenizer_path,
                          bool writer) {
  Status saved = Status::Ok();
  if (what.adapters) {
    if (writer) saved = lora_save(*what.adapters, dir, what.base_path);
  } else {
    saved = what.save_model(dir);
  }
  if (!saved.ok()) return saved;
  if (writer) {
    std::error_code ec;
    fs::copy_file(tokenizer_path, fs::path(dir) / "tokenizer.model", fs::copy_options::overwrite_existing, ec);
  }
  return Status::Ok();
}

}  // namespace native
}  // namespace protocol
