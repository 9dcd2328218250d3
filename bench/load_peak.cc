// The memory peak of loading a model, on this machine's CPU: what a process
// holds above its resident set just before the model is built, at the
// highest point of the load (getrusage ru_maxrss minus VmRSS before, as the
// FSDP memory benchmark measures a rank). Prints figures; asserts nothing.
// One load per process (ru_maxrss is the process's peak since it started):
// bench/load_peak.sh writes a model once and runs each load in a fresh
// process.
//
//   build/protocol_load_bench write DIR --preset layers-100m [--dtype fp32|bf16] [--seed 1]
//   build/protocol_load_bench load DIR [--quant nf4|none] [--double-quant] [--way backend|whole]
//
// write: DIR/config.json and DIR/model.safetensors of the preset with seeded
//        random weights (model_init_random), in --dtype (default fp32).
// load:  the model of DIR in float32 on the CPU, its weights from the file,
//        and for --quant nf4 (the default) its decoder projections in NF4:
//          --way backend  what the native backends' load does: each
//                         projection read, quantized and freed in turn
//          --way whole    the whole model read in float32, then
//                         model_quantize_nf4 (the load before that)
//        Prints the RSS before, the peak above it, what is held after the
//        load (RSS after minus before) and the NF4 bytes.
// Set MALLOC_MMAP_THRESHOLD_=65536 (the script does) so that RSS follows
// what the process holds rather than what glibc keeps for reuse.

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <c10/core/GradMode.h>

#include "bench_args.h"
#include "backends/native/case/case_weights.h"
#include "backends/native/model/model.h"
#include "backends/native/model/model_config.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/platform/host_memory.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/quantized_model.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::native;

namespace {

struct Options {
  std::string command;  // write | load
  std::string dir;
  std::string preset = "layers-100m";
  std::string dtype = "fp32";
  int64_t seed = 1;
  std::string quant = "nf4";
  bool double_quant = false;
  std::string way = "backend";
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double MiB(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0); }

int Write(const Options& o) {
  auto config = PresetConfig(o.preset);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 2;
  }
  Model model = model_create(*config, at::TensorOptions().dtype(o.dtype == "bf16" ? at::kBFloat16 : at::kFloat));
  model_init_random(model, static_cast<uint64_t>(o.seed));
  if (Status s = model_save(model, o.dir); !s.ok()) {
    std::fprintf(stderr, "%s\n", s.message().c_str());
    return 3;
  }
  std::printf("wrote %s: preset %s, %lld parameters, %s, seed %lld\n", o.dir.c_str(), o.preset.c_str(),
              static_cast<long long>(config->ParameterCount()), o.dtype.c_str(), static_cast<long long>(o.seed));
  return 0;
}

// The load being measured. `backend`: what fsdp_backend.cc and worker.cc do
// (case_weights.h: each projection read, quantized and freed in turn);
// `whole` (or --quant none): the whole model read in float32 first.
Result<Model> LoadModel(const ModelConfig& config, const Options& o) {
  const bool nf4 = o.quant == "nf4";
  CaseWeights weights;
  weights.source = WeightsSource::kPath;
  if (o.way == "whole" || !nf4) {
    Model model = model_create(config, at::TensorOptions().dtype(at::kFloat));
    if (Status s = LoadOrInitWeights(model, weights, o.dir, o.seed); !s.ok()) return s;
    if (nf4) model_quantize_nf4(model, o.double_quant);
    return model;
  }
  Model model = model_create(config, at::TensorOptions().dtype(at::kFloat), CaseProjectionTensors(true));
  if (Status s = LoadOrInitNf4Weights(model, weights, o.dir, o.seed, o.double_quant); !s.ok()) return s;
  return model;
}

int Load(const Options& o) {
  auto config = ReadHfConfig(o.dir);
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().message().c_str());
    return 2;
  }
  {
    // Touch the code paths of a load once, so that their first-use allocations
    // are in the baseline, not in the figure.
    c10::NoGradGuard no_grad;
    at::Tensor w = at::randn({128, 128}).to(at::kFloat);
    Nf4Tensor q = nf4_quantize(w, o.double_quant);
    at::Tensor back = nf4_dequantize(q);
  }
  const int64_t before = CurrentRssBytes().value_or(0);
  const double t0 = Now();
  auto model = LoadModel(*config, o);
  const double seconds = Now() - t0;
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().message().c_str());
    return 3;
  }
  const int64_t peak = PeakRssBytes(), after = CurrentRssBytes().value_or(0);
  const int64_t nf4 = nf4_weight_bytes(*model);
  std::printf("load %s quant=%s%s way=%s: rss_before %.1f MiB, peak above it %.1f MiB, held after %.1f MiB, "
              "NF4 %.1f MiB, %d thread(s), %.2f s, libtorch %s\n",
              o.dir.c_str(), o.quant.c_str(), o.double_quant ? " (double quant)" : "", o.way.c_str(), MiB(before),
              MiB(peak - before), MiB(after - before), MiB(nf4), at::get_num_threads(), seconds,
              compat::TorchVersion().c_str());
  return 0;
}

int Usage(int code) {
  std::fprintf(code == 0 ? stdout : stderr,
               "usage: protocol_load_bench write DIR [--preset P] [--dtype fp32|bf16] [--seed N]\n"
               "       protocol_load_bench load DIR [--quant nf4|none] [--double-quant] [--way backend|whole]\n");
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (argc >= 2 && (std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h")) return Usage(0);
  if (argc < 3) return Usage(2);
  o.command = argv[1];
  o.dir = argv[2];
  for (BenchArgs args(argc, argv, 3); args.Next();) {
    const std::string& a = args.flag();
    if (a == "--preset") o.preset = args.Value();
    else if (a == "--dtype") o.dtype = args.Value();
    else if (a == "--seed") o.seed = std::atoll(args.Value().c_str());
    else if (a == "--quant") o.quant = args.Value();
    else if (a == "--double-quant") o.double_quant = true;
    else if (a == "--way") o.way = args.Value();
    else return Usage(2);
  }
  if ((o.dtype != "fp32" && o.dtype != "bf16") || (o.quant != "nf4" && o.quant != "none") ||
      (o.way != "backend" && o.way != "whole"))
    return Usage(2);
  if (o.command == "write") return Write(o);
  if (o.command == "load") return Load(o);
  return Usage(2);
}
