// Benchmarks of the native Llama-2 model on this machine's CPU (or CUDA when
// the libtorch build has it): training-step throughput and single-stream
// greedy decode speed, per preset. Prints figures; asserts nothing.
//
//   build/protocol_bench                       # tiny and small-100m, defaults below
//   build/protocol_bench --presets tiny --steps 10 --batch 8 --seq 128 --decode 64
//
// Method (one place, as in google/benchmark): `warmup` steps are run and
// discarded, then `steps` timed steps; on CUDA the device is synchronised
// before each clock read. Training FLOPs use the PaLM/torchtitan formula
// (ModelConfig::TrainingFlopsPerToken); achieved GFLOP/s = FLOPs/token ×
// tokens/s. The BLAS library libtorch actually loaded is printed, since
// Debian's libtorch multiplies matrices through whatever libblas.so.3 points to
// (the reference BLAS was measured ~18× slower than OpenBLAS on a train step).

#include <ATen/Parallel.h>
#include <dlfcn.h>
#include <link.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backends/native/data.h"
#include "backends/native/generate.h"
#include "backends/native/model.h"
#include "backends/native/model_config.h"
#include "backends/native/torch_compat.h"
#include "backends/native/train.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::native;

namespace {

struct Options {
  std::vector<std::string> presets = {"tiny", "small-100m"};
  int warmup = 2;
  int steps = 5;
  int64_t batch = 8;
  int64_t seq = 128;
  int64_t decode = 64;
  int64_t prompt = 16;
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Every loaded shared object whose name mentions a BLAS implementation,
// resolved through symlinks (libblas.so.3 → .../openblas-openmp/libblas.so.3).
std::vector<std::string> LoadedBlas() {
  std::vector<std::string> found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* out = static_cast<std::vector<std::string>*>(data);
        std::string name = info->dlpi_name ? info->dlpi_name : "";
        if (name.find("blas") != std::string::npos || name.find("mkl") != std::string::npos) {
          char resolved[4096];
          out->push_back(realpath(name.c_str(), resolved) ? resolved : name);
        }
        return 0;
      },
      &found);
  return found;
}

void BenchPreset(const std::string& preset, const Options& o, const at::TensorOptions& device) {
  auto config = PresetConfig(preset);
  if (!config.ok()) {
    std::printf("%s: %s\n", preset.c_str(), config.status().message().c_str());
    return;
  }
  ModelConfig c = config.value();
  int64_t seq = std::min(o.seq, c.max_seq_len);
  Model model = model_create(c, device);
  model_init_random(model, 1234);

  // ---- training: random tokens, every target counted ----
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> token(3, static_cast<int>(c.vocab_size) - 1);
  std::vector<Sequence> data(o.batch);
  for (auto& s : data) {
    s.tokens.resize(seq + 1);
    for (int& t : s.tokens) t = token(rng);
    s.mask.assign(seq, 1);  // one flag per target (Sequence contract)
  }
  std::vector<const Sequence*> batch;
  for (const auto& s : data) batch.push_back(&s);
  TrainOptions train;
  train.batch_size = o.batch;
  AdamW optimizer(model_trainable(model), train);
  for (int i = 0; i < o.warmup; ++i) train_step(model, optimizer, batch, train, 1e-4);
  compat::DeviceSynchronize(device.device());
  double start = Now();
  double loss = 0;
  for (int i = 0; i < o.steps; ++i) loss = train_step(model, optimizer, batch, train, 1e-4).loss;
  compat::DeviceSynchronize(device.device());
  double step_seconds = (Now() - start) / o.steps;
  double tokens_per_second = o.batch * seq / step_seconds;
  double gflops = c.TrainingFlopsPerToken(seq) * tokens_per_second / 1e9;
  std::printf("%-10s params %6.1f M  train  B=%lld T=%lld: %8.3f s/step  %9.0f tokens/s  %7.1f GFLOP/s  (loss %.3f)\n",
              preset.c_str(), c.ParameterCount() / 1e6, static_cast<long long>(o.batch),
              static_cast<long long>(seq), step_seconds, tokens_per_second, gflops, loss);

  // ---- single-stream greedy decode with the KV cache ----
  std::vector<int> prompt(o.prompt);
  for (int& t : prompt) t = token(rng);
  GenerateOptions g;
  g.max_new_tokens = std::min<int64_t>(o.decode, c.max_seq_len - o.prompt);
  g.ignore_eos = true;
  (void)generate_greedy(model, prompt, g);  // warm-up
  compat::DeviceSynchronize(device.device());
  start = Now();
  auto generation = generate_greedy(model, prompt, g);
  compat::DeviceSynchronize(device.device());
  double seconds = Now() - start;
  size_t generated = generation.ok() ? generation->tokens.size() : 0;
  std::printf("%-10s params %6.1f M  decode prompt=%lld new=%zu: %8.4f s/token  %9.1f tokens/s\n",
              preset.c_str(), c.ParameterCount() / 1e6, static_cast<long long>(o.prompt), generated,
              seconds / std::max<size_t>(generated, 1), generated / seconds);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--presets") o.presets = Split(next(), ',');
    else if (a == "--steps") o.steps = std::atoi(next().c_str());
    else if (a == "--warmup") o.warmup = std::atoi(next().c_str());
    else if (a == "--batch") o.batch = std::atoll(next().c_str());
    else if (a == "--seq") o.seq = std::atoll(next().c_str());
    else if (a == "--decode") o.decode = std::atoll(next().c_str());
    else {
      std::fprintf(stderr,
                   "usage: protocol_bench [--presets a,b] [--steps N] [--warmup N] [--batch B] "
                   "[--seq T] [--decode N]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  // As the fsdp backend does: one intra-op thread per hardware thread.
  at::set_num_threads(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  at::TensorOptions device = at::TensorOptions().dtype(at::kFloat);
  double load[3] = {0, 0, 0};
  getloadavg(load, 3);
  std::printf("load average %.2f (figures are contended when it exceeds the core count)\n", load[0]);
  std::printf("libtorch %s, %d threads, device %s\n", compat::TorchVersion().c_str(),
              at::get_num_threads(), device.device().str().c_str());
  std::vector<std::string> blas = LoadedBlas();
  std::printf("BLAS loaded: %s\n", blas.empty() ? "(none found by name)" : Join(blas, ", ").c_str());
  for (const auto& preset : o.presets) BenchPreset(preset, o, device);
  return 0;
}
