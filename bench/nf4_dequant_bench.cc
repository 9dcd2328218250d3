// NF4 dequantization throughput (nf4.h) against a plain copy of the same
// output bytes, on this machine's CPU (or CUDA with --device cuda). Prints
// figures; asserts nothing.
//
//   build/protocol_nf4_bench                                   # 4096x4096 and 8192x28672, bf16 and fp32
//   build/protocol_nf4_bench --shapes 4096x4096 --dtypes bf16 --reps 9 --double-quant --threads 1
//
// Per weight shape and output dtype, each path is run once to warm up, then
// `reps` times; the best time is kept (the machine may be shared: the best
// run is the one least disturbed). Paths:
//   copy            out.clone() of a tensor of the output's dtype and shape:
//                   allocates and writes the same output bytes (reading as
//                   many), the yardstick
//   four-pass       the former non-CPU path: the 256-entry pair table copied
//                   to the device, bytes → int32 index → float32 levels
//                   (index_select) → scaled in place → .to(dtype)
//   fp32 then .to   the former CPU path: the one-pass kernel into float32,
//                   then converted (bf16 only)
//   aten            nf4_dequantize_aten: the cached table, int32 index,
//                   index_select, at::mul_out into the dtype
//   one-pass        nf4_dequantize: the CPU kernel (on CUDA: the kernel of
//                   nf4_cuda.cu in a build with CUDA kernels, else the aten path)
// "vs copy" = copy's time / the path's time: 1 is as fast as copying the
// output bytes; the kernel also reads a half byte per weight that copy
// does not, and copy reads e bytes that the kernel does not.
// The weight is random codes and scales (the throughput does not depend on
// the values), made directly rather than quantized, so large shapes fit.

#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <vector>
#include <c10/core/GradMode.h>

#include "bench_args.h"
#include "backends/native/platform/torch_compat.h"
#include "backends/native/quant/nf4.h"
#include "runner/base/text.h"

using namespace protocol;
using namespace protocol::native;

namespace {

struct Options {
  std::vector<std::string> shapes = {"4096x4096", "8192x28672"};
  std::vector<std::string> dtypes = {"bf16", "fp32"};
  std::string device = "cpu";
  int reps = 5;
  int threads = 0;  // intra-op threads; 0: one per hardware thread
  bool double_quant = false;
};

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best of `reps` timed runs after one warm-up.
double BestSeconds(const std::function<at::Tensor()>& run, int reps, const at::Device& device) {
  run();
  compat::DeviceSynchronize(device);
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const double t0 = Now();
    at::Tensor out = run();
    compat::DeviceSynchronize(device);
    best = std::min(best, Now() - t0);
  }
  return best;
}

// The former four passes (the table built on the host and copied each call).
at::Tensor FourPass(const Nf4Tensor& q, at::ScalarType dtype) {
  at::Tensor levels = nf4_levels();
  at::Tensor table = at::stack({levels.repeat_interleave(16), levels.repeat({16})}, 1).to(q.packed.device());
  at::Tensor out = table.index_select(0, q.packed.to(at::kInt)).view({q.blocks(), kNf4BlockSize});
  out.mul_(nf4_absmax(q).unsqueeze(1));
  return out.view({-1}).narrow(0, 0, q.numel).view(q.shape).to(dtype);
}

// Random codes and scales of a weight of `shape`, as nf4_quantize lays them out.
Nf4Tensor RandomNf4(const std::vector<int64_t>& shape, bool double_quant, const at::Device& device) {
  Nf4Tensor q;
  q.shape = shape;
  q.numel = 1;
  for (int64_t d : shape) q.numel *= d;
  const int64_t blocks = q.blocks();
  const at::TensorOptions bytes = at::TensorOptions().dtype(at::kByte).device(device);
  q.packed = at::randint(0, 256, {blocks * kNf4BlockSize / 2}, bytes);
  if (!double_quant) {
    q.absmax = at::rand({blocks}, at::TensorOptions().device(device)) * 0.1;
    return q;
  }
  const int64_t groups = (blocks + kNf4DqGroupSize - 1) / kNf4DqGroupSize;
  q.absmax_codes = at::randint(0, 256, {blocks}, bytes);
  q.absmax_scales = at::rand({groups}, at::TensorOptions().device(device)) * 0.05;
  q.absmax_mean = at::full({1}, 0.05, at::TensorOptions().device(device));
  return q;
}

std::vector<int64_t> ParseShape(const std::string& s) {
  std::vector<int64_t> shape;
  for (const std::string& d : Split(s, 'x')) shape.push_back(std::atoll(d.c_str()));
  return shape;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (BenchArgs args(argc, argv, 1); args.Next();) {
    const std::string& a = args.flag();
    if (a == "--shapes") o.shapes = Split(args.Value(), ',');
    else if (a == "--dtypes") o.dtypes = Split(args.Value(), ',');
    else if (a == "--device") o.device = args.Value();
    else if (a == "--reps") o.reps = std::max(1, std::atoi(args.Value().c_str()));
    else if (a == "--double-quant") o.double_quant = true;
    else if (a == "--threads") o.threads = std::atoi(args.Value().c_str());
    else {
      std::fprintf(stderr,
                   "usage: protocol_nf4_bench [--shapes RxC,...] [--dtypes bf16,fp16,fp32] [--reps N]\n"
                   "                          [--double-quant] [--threads N] [--device cpu|cuda]\n");
      return a == "--help" ? 0 : 2;
    }
  }
  if (o.device == "cuda" && !compat::CudaAvailable()) {
    std::fprintf(stderr, "--device cuda: this build or machine has no CUDA device\n");
    return 2;
  }
  at::set_num_threads(o.threads > 0 ? o.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  const at::Device device = o.device == "cuda" ? at::Device(at::kCUDA, 0) : at::Device(at::kCPU);
  c10::NoGradGuard no_grad;
  std::printf("nf4 dequantization vs a copy of the output bytes: %s, %d threads, best of %d%s\n", device.str().c_str(),
              at::get_num_threads(), o.reps, o.double_quant ? ", double-quantized absmax" : "");
  for (const std::string& shape_text : o.shapes) {
    const std::vector<int64_t> shape = ParseShape(shape_text);
    const Nf4Tensor q = RandomNf4(shape, o.double_quant, device);
    for (const std::string& name : o.dtypes) {
      const at::ScalarType dtype = name == "fp32" ? at::kFloat : name == "fp16" ? at::kHalf : at::kBFloat16;
      const double out_bytes = static_cast<double>(q.numel) * static_cast<double>(c10::elementSize(dtype));
      const at::Tensor src = at::empty(shape, at::TensorOptions().dtype(dtype).device(device)).fill_(1);
      struct Path {
        const char* name;
        std::function<at::Tensor()> run;
      };
      std::vector<Path> paths = {
          {"copy", [&] { return src.clone(); }},
          {"four-pass", [&] { return FourPass(q, dtype); }},
      };
      if (dtype != at::kFloat) paths.push_back({"fp32 then .to", [&] { return nf4_dequantize(q, at::kFloat).to(dtype); }});
      paths.push_back({"aten", [&] { return nf4_dequantize_aten(q, dtype); }});
      paths.push_back({"one-pass", [&] { return nf4_dequantize(q, dtype); }});
      std::printf("\n%s (%lld weights) -> %s, %.0f MB out\n", shape_text.c_str(), static_cast<long long>(q.numel),
                  name.c_str(), out_bytes / 1e6);
      std::printf("  %-14s %10s %12s %8s\n", "path", "ms", "GB/s out", "vs copy");
      double copy = 0;
      for (const Path& p : paths) {
        const double s = BestSeconds(p.run, o.reps, device);
        if (copy == 0) copy = s;
        std::printf("  %-14s %10.3f %12.2f %8.2f\n", p.name, s * 1e3, out_bytes / s / 1e9, copy / s);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
