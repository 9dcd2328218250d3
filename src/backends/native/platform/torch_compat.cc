#include "backends/native/platform/torch_compat.h"

#include <torch/csrc/api/include/torch/version.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/record_function.h>
#if __has_include(<torch/csrc/autograd/profiler_kineto.h>)
#define PROTOCOL_WITH_TORCH_PROFILER 1
#include <torch/csrc/autograd/profiler_kineto.h>
#else
#define PROTOCOL_WITH_TORCH_PROFILER 0
#endif
#include <c10/core/CPUAllocator.h>
#include <ATen/Parallel.h>

// The c10d headers hide Gloo (and NCCL) behind the build's feature macros.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO 1
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <mutex>
#include <set>
#include <tuple>
#include <type_traits>
#include <unordered_map>

// CUDA facilities exist only where the CUDA runtime headers do (the CUDA wheel);
// Debian's CPU libtorch ships ATen/cuda headers but not cuda_runtime_api.h.
#if __has_include(<cuda_runtime_api.h>) && __has_include(<c10/cuda/CUDACachingAllocator.h>)
#define PROTOCOL_WITH_CUDA 1
#include <cuda_runtime_api.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAFunctions.h>
#else
#define PROTOCOL_WITH_CUDA 0
#endif

#define PROTOCOL_TORCH_2 (TORCH_VERSION_MAJOR >= 2)
#define PROTOCOL_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) || (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))
// Gloo's _allgather_base: checked in 2.6's headers and run there. (Its _reduce_scatter_base,
// also from 2.6, is an all-reduce of a copy of the input: ReduceScatterSumAsync does not take it.)
#define PROTOCOL_GLOO_FLAT PROTOCOL_TORCH_AT_LEAST(2, 6)
// TCPStoreOptions::useLibUV defaults to true from 2.4 on; builds without libuv refuse it.
#define PROTOCOL_TCPSTORE_LIBUV PROTOCOL_TORCH_AT_LEAST(2, 4)

#if PROTOCOL_WITH_CUDA && __has_include(<torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>) && __has_include(<nccl.h>)
#define PROTOCOL_WITH_NCCL 1
#ifndef USE_C10D_NCCL
#define USE_C10D_NCCL 1
#endif
#include <ATen/cuda/CUDAEvent.h>
#include <nccl.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#else
#define PROTOCOL_WITH_NCCL 0
#endif
// scripts/check-cuda-headers.sh compiles this file against CUDA libtorch
// headers and asks for the CUDA and NCCL paths to be the ones compiled.
#if defined(PROTOCOL_REQUIRE_NCCL) && !PROTOCOL_WITH_NCCL
#error "PROTOCOL_REQUIRE_NCCL: the CUDA runtime, c10/cuda and NCCL headers were not all found"
#endif

namespace protocol {
namespace native {
namespace compat {

namespace {

// K or V (B,NKV,S,HD) with each key/value head repeated for its rep query
// heads, in grouped-query order (head h reads key/value head h / rep): one
// copy of a broadcast view (Hugging Face's repeat_kv). repeat_interleave
// gives the same values, but libtorch 1.13's builds a tensor of repeats and
// reads scalars of it back (two a call, four in one attention:
// torch_compat_test.cc), and 2.x's on CUDA runs a fill, a cumsum and two
// index kernels where one copy does.
at::Tensor RepeatKeyValueHeads(const at::Tensor& x, int64_t rep) {
  if (rep == 1) return x;
  std::vector<int64_t> shape = x.sizes().vec();  // (…, NKV, S, HD)
  const int64_t heads_dim = static_cast<int64_t>(shape.size()) - 3;
  std::vector<int64_t> expanded = shape;
  expanded.insert(expanded.begin() + heads_dim + 1, rep);  // (…, NKV, rep, S, HD)
  shape[heads_dim] *= rep;                                   // (…, NKV·rep, S, HD)
  return x.unsqueeze(heads_dim + 1).expand(expanded).reshape(shape);
}

#if PROTOCOL_TORCH_2
// at::SDPBackend's order (ATen/SDPBackend.h in 2.6; 2.0-2.2 end at efficient):
// error = -1, math, flash_attention, efficient_attention, cudnn_attention, overrideable.
constexpr int64_t kSdpaFlash = 1, kSdpaEfficient = 2;

// Whether libtorch's SDPA takes these grouped key/value heads as they are
// (enable_gqa, 2.5 on) on a fused kernel: flash or memory-efficient. Where it
// would pick its math path, which repeats the heads itself, or on an older
// libtorch, the heads are repeated here instead and the usual kernel runs.
bool GroupedKernelTakes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const c10::optional<at::Tensor>& mask, bool is_causal) {
#if PROTOCOL_TORCH_AT_LEAST(2, 5)
  const int64_t choice = at::_fused_sdp_choice(q, k, v, mask, 0.0, is_causal, c10::nullopt, /*enable_gqa=*/true);
  return choice == kSdpaFlash || choice == kSdpaEfficient;
#else
  (void)q, (void)k, (void)v, (void)mask, (void)is_causal;
  return false;
#endif
}
#endif

}  // namespace

at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     bool is_causal, const std::optional<at::Tensor>& mask) {
  const int64_t rep = q.size(-3) / k.size(-3);
#if PROTOCOL_TORCH_2
  c10::optional<at::Tensor> attn_mask;
  if (!is_causal && mask) attn_mask = *mask;
#if PROTOCOL_TORCH_AT_LEAST(2, 5)
  if (rep > 1 && GroupedKernelTakes(q, k, v, attn_mask, is_causal))
    return at::scaled_dot_product_attention(q, k, v, attn_mask, 0.0, is_causal, c10::nullopt, /*enable_gqa=*/true);
#endif
  return at::scaled_dot_product_attention(q, RepeatKeyValueHeads(k, rep), RepeatKeyValueHeads(v, rep), attn_mask, 0.0,
                                          is_causal);
#else
  // scores (B,NH,T,S) = q·kᵀ / √HD, accumulated in float32 for a stable softmax.
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  at::Tensor scores = at::matmul(q, RepeatKeyValueHeads(k, rep).transpose(-2, -1)).to(at::kFloat) * scale;
  if (is_causal) {
    const int64_t t = q.size(-2), s = k.size(-2);
    at::Tensor future = at::ones({t, s}, q.options().dtype(at::kBool)).triu(1);
    scores = scores.masked_fill(future, -std::numeric_limits<float>::infinity());
  } else if (mask) {
    scores = scores.masked_fill(mask->logical_not(), -std::numeric_limits<float>::infinity());
  }
  at::Tensor probs = at::softmax(scores, -1).to(v.scalar_type());
  return at::matmul(probs, RepeatKeyValueHeads(v, rep));  // (B,NH,T,HD)
#endif
}

bool SdpaTakesGroupedHeads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal) {
#if PROTOCOL_TORCH_2
  return q.size(-3) != k.size(-3) && GroupedKernelTakes(q, k, v, c10::nullopt, is_causal);
#else
  (void)q, (void)k, (void)v, (void)is_causal;
  return false;
#endif
}

std::string TorchVersion() { return TORCH_VERSION; }

std::string DtypeName(at::ScalarType dtype) {
  switch (dtype) {
    case at::kFloat: return "float32";
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kDouble: return "float64";
    default: return c10::toString(dtype);
  }
}

std::string CudaRuntimeVersion() {
#if PROTOCOL_WITH_CUDA
  return std::to_string(CUDART_VERSION / 1000) + "." + std::to_string(CUDART_VERSION % 1000 / 10);
#else
  return "";
#endif
}

std::string NcclVersion() {
#if PROTOCOL_WITH_NCCL
  // The loaded library's own answer (libtorch_cuda brings libnccl.so.2 in):
  // code = major·10000 + minor·100 + patch from 2.9 on.
  using GetVersion = int (*)(int*);
  if (auto get = reinterpret_cast<GetVersion>(::dlsym(RTLD_DEFAULT, "ncclGetVersion"))) {
    int code = 0;
    if (get(&code) == 0 && code >= 10000)
      return std::to_string(code / 10000) + "." + std::to_string(code % 10000 / 100) + "." + std::to_string(code % 100);
  }
  return std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH);
#else
  return "";
#endif
}

std::string TorchCudaArchitectures() {
#if PROTOCOL_WITH_CUDA
  return PROTOCOL_TORCH_CUDA_ARCHITECTURES;
#else
  return "";
#endif
}

std::string BuildFeatures() {
  std::string out = std::string("libtorch ") + TORCH_VERSION;
#if PROTOCOL_WITH_CUDA
  out += ", CUDA " + CudaRuntimeVersion();
#if PROTOCOL_WITH_NCCL
  out += ", NCCL " + NcclVersion();
#endif
#else
  out += ", CPU only";
#endif
  return out;
}

void TurnOffCudnn() {
  at::globalContext().setUserEnabledCuDNN(false);
#if PROTOCOL_TORCH_AT_LEAST(2, 3)  // SDPA's cuDNN backend arrived in 2.3
  at::globalContext().setSDPUseCuDNN(false);
#endif
}

bool CudnnTurnedOff() {
  bool off = !at::globalContext().userEnabledCuDNN();
#if PROTOCOL_TORCH_AT_LEAST(2, 3)
  off = off && !at::globalContext().userEnabledCuDNNSDP();
#endif
  return off;
}

std::string SdpaBackendFor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal) {
#if PROTOCOL_TORCH_2
  static const char* const kNames[] = {"math", "flash", "efficient", "cudnn", "overrideable"};
  const int64_t rep = q.size(-3) / k.size(-3);
  int64_t choice = 0;
#if PROTOCOL_TORCH_AT_LEAST(2, 5)
  if (SdpaTakesGroupedHeads(q, k, v, is_causal))
    choice = at::_fused_sdp_choice(q, k, v, c10::nullopt, 0.0, is_causal, c10::nullopt, /*enable_gqa=*/true);
  else
#endif
    choice = at::_fused_sdp_choice(q, RepeatKeyValueHeads(k, rep), RepeatKeyValueHeads(v, rep), c10::nullopt, 0.0,
                                   is_causal);
  if (choice >= 0 && choice < static_cast<int64_t>(std::size(kNames))) return kNames[choice];
  return "unknown (" + std::to_string(choice) + ")";
#else
  (void)q, (void)k, (void)v, (void)is_causal;
  return "math";
#endif
}

#if PROTOCOL_WITH_CUDA
struct CudaGraph::Impl {
  at::cuda::CUDAGraph graph;
};
#else
struct CudaGraph::Impl {};
#endif

CudaGraph::CudaGraph() = default;
CudaGraph::~CudaGraph() = default;

bool CudaGraph::Capture(const std::function<void()>& step, const at::Device& device) {
#if PROTOCOL_WITH_CUDA
  if (!device.is_cuda()) return false;
  c10::cuda::CUDAGuard device_guard(device);
  DeviceSynchronize(device);  // the side stream starts after everything queued so far
  c10::cuda::CUDAStream side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index());
  impl_ = std::make_unique<Impl>();
  {
    c10::cuda::CUDAStreamGuard on_side(side);
    step();  // the warm-up, a real step
    side.synchronize();
    impl_->graph.capture_begin();
    step();  // recorded, not run
    impl_->graph.capture_end();
  }
  DeviceSynchronize(device);
  return true;
#else
  (void)step, (void)device;
  return false;
#endif
}

void CudaGraph::Replay() {
#if PROTOCOL_WITH_CUDA
  TORCH_CHECK(impl_ != nullptr, "CudaGraph::Replay before a Capture");
  impl_->graph.replay();
#endif
}

bool GlooReducesBfloat16() { return PROTOCOL_TORCH_2; }

bool CudaAvailable() { return at::hasCUDA(); }

std::string CudaDeviceName() {
#if PROTOCOL_WITH_CUDA
  if (!at::hasCUDA()) return "";
  return at::cuda::getCurrentDeviceProperties()->name;
#else
  return "";
#endif
}

void CudaSetDevice(int index) {
#if PROTOCOL_WITH_CUDA
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(index));
#else
  (void)index;
#endif
}

#if PROTOCOL_WITH_CUDA
// The caching allocator's per-device state exists once CUDA is initialised
// (libtorch 2.x does that lazily, at the first CUDA allocation); its
// statistics calls refuse a device before that ("Invalid device argument").
// A one-element allocation on the current device initialises it, on any version.
void InitCudaAllocator() {
  static thread_local int initialised_device = -1;
  const int device = c10::cuda::current_device();
  if (initialised_device == device) return;
  at::empty({1}, at::TensorOptions().dtype(at::kByte).device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  initialised_device = device;
}
#endif

std::optional<int64_t> CudaPeakMemoryBytes() {
#if PROTOCOL_WITH_CUDA
  if (!at::hasCUDA()) return std::nullopt;
  InitCudaAllocator();
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(c10::cuda::current_device());
  return stats.allocated_bytes[0].peak;  // StatType::AGGREGATE
#else
  return std::nullopt;
#endif
}

void CudaResetPeakMemory() {
#if PROTOCOL_WITH_CUDA
  if (!at::hasCUDA()) return;
  InitCudaAllocator();
  c10::cuda::CUDACachingAllocator::resetPeakStats(c10::cuda::current_device());
#endif
}

void* CudaCurrentStream(const at::Device& device) {
#if PROTOCOL_WITH_CUDA
  if (device.is_cuda()) return at::cuda::getCurrentCUDAStream(device.index()).stream();
#else
  (void)device;
#endif
  return nullptr;
}

void DeviceSynchronize(const at::Device& device) {
#if PROTOCOL_WITH_CUDA
  if (device.is_cuda()) c10::cuda::device_synchronize();
#else
  (void)device;
#endif
}

void ForeachMulByScalarTensor(const std::vector<at::Tensor>& tensors, const at::Tensor& factor) {
  if (tensors.empty()) return;
#if PROTOCOL_TORCH_AT_LEAST(2, 1)
  at::_foreach_mul_(tensors, factor);
#else
  for (const at::Tensor& t : tensors) const_cast<at::Tensor&>(t).mul_(factor);
#endif
}

void ForeachCopy(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src) {
  if (dst.empty()) return;
#if PROTOCOL_TORCH_AT_LEAST(2, 2)
  at::_foreach_copy_(dst, src);
#else
  for (size_t i = 0; i < dst.size(); ++i) const_cast<at::Tensor&>(dst[i]).copy_(src[i]);
#endif
}

// ---- AdamW in one pass ------------------------------------------------------------

bool FusedAdamWAvailable(const at::Device& device) {
  if (device.is_cuda()) return PROTOCOL_TORCH_AT_LEAST(2, 1) && PROTOCOL_WITH_CUDA;
  if (!device.is_cpu()) return false;
  // 2.1–2.3 have no CPU kernel of _fused_adamw_; 1.13 has this adapter's loop.
  return PROTOCOL_TORCH_AT_LEAST(2, 4) || !PROTOCOL_TORCH_2;
}

#if !PROTOCOL_TORCH_2
namespace {
// _fused_adamw_'s CPU kernel (libtorch 2.4 on), element by element: the
// coefficients are rounded to float32 once, and each update is taken in
// float32 in the kernel's order.
void AdamWLoop(at::Tensor& p, const at::Tensor& g_in, at::Tensor& m, at::Tensor& v, const AdamWHyper& h) {
  const at::Tensor g = g_in.contiguous();
  float *pp = p.data_ptr<float>(), *mp = m.data_ptr<float>(), *vp = v.data_ptr<float>();
  const float* gp = g.data_ptr<float>();
  const double t = static_cast<double>(h.step);
  const auto decay = static_cast<float>(1.0 - h.lr * h.weight_decay);
  const auto beta1 = static_cast<float>(h.beta1), beta2 = static_cast<float>(h.beta2);
  const auto grad_coefficient = static_cast<float>(1.0 - h.beta1);
  const auto square_coefficient = static_cast<float>(1.0 - h.beta2);
  const auto step_size = static_cast<float>(h.lr / (1.0 - std::pow(h.beta1, t)));
  const auto bias2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(h.beta2, t)));
  const auto eps = static_cast<float>(h.eps);
  at::parallel_for(0, p.numel(), 4096, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      float param = pp[i];
      if (h.weight_decay != 0) param *= decay;
      const float grad = gp[i];
      mp[i] = mp[i] * beta1 + grad * grad_coefficient;
      vp[i] = vp[i] * beta2 + grad * grad * square_coefficient;
      pp[i] = param - step_size * mp[i] / (std::sqrt(vp[i]) / bias2_sqrt + eps);
    }
  });
}
}  // namespace
#endif

void FusedAdamW(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                const std::vector<at::Tensor>& m, const std::vector<at::Tensor>& v, const AdamWHyper& h) {
  if (params.empty()) return;
#if PROTOCOL_TORCH_2
  // The step count as _fused_adamw_ reads it: a float32 scalar on the device, one entry a tensor.
  const at::Tensor step = at::full({}, static_cast<double>(h.step), params[0].options().dtype(at::kFloat));
  const std::vector<at::Tensor> steps(params.size(), step);
  at::_fused_adamw_(params, grads, m, v, /*max_exp_avg_sqs=*/{}, steps, h.lr, h.beta1, h.beta2, h.weight_decay, h.eps,
                    /*amsgrad=*/false, /*maximize=*/false);
#else
  for (size_t i = 0; i < params.size(); ++i) {
    at::Tensor p = params[i], mi = m[i], vi = v[i];
    AdamWLoop(p, grads[i], mi, vi, h);
  }
#endif
}

// ---- RMSNorm in one kernel ---------------------------------------------------------
bool AtenFusedRmsNormAvailable(const at::Tensor& x, const at::Tensor& weight) {
#if PROTOCOL_TORCH_AT_LEAST(2, 4)
  if (!x.is_cuda() || weight.scalar_type() != x.scalar_type() || weight.device() != x.device()) return false;
  // at::rms_norm (2.4 on) is composite until a release gives it this op's CUDA kernel.
  static const bool fused_kernel = [] {
    const auto op = c10::Dispatcher::singleton().findOp({"aten::_fused_rms_norm", ""});
    return op.has_value() && op->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
  }();
  return fused_kernel;
#else
  (void)x;
  (void)weight;
  return false;
#endif
}

at::Tensor AtenFusedRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps) {
#if PROTOCOL_TORCH_AT_LEAST(2, 4)
  return at::rms_norm(x, {x.size(-1)}, weight, eps);
#else
  (void)x;
  (void)weight;
  (void)eps;
  TORCH_CHECK(false, "AtenFusedRmsNorm: libtorch ", TORCH_VERSION, " has no rms_norm");
#endif
}

// ---- host reads ---------------------------------------------------------------

namespace {
std::atomic<int64_t> host_reads{0};
}  // namespace

std::vector<double> ReadToHost(const at::Tensor& t) {
  ++host_reads;
  at::Tensor host = t.detach().to(at::kCPU, at::kDouble).contiguous().view({-1});
  const double* p = host.data_ptr<double>();
  return std::vector<double>(p, p + host.numel());
}

int64_t HostReads() { return host_reads.load(); }

// ---- counting ops -----------------------------------------------------------------

namespace {
thread_local std::map<std::string, int64_t>* counting = nullptr;
thread_local int op_depth = 0;

// The autograd engine's record of one backward node: not an op itself, the
// ops the node runs are counted as outermost ones.
bool BackwardNode(const at::RecordFunction& fn) {
  static constexpr char kPrefix[] = "autograd::engine::evaluate_function";
  return std::strncmp(fn.name(), kPrefix, sizeof(kPrefix) - 1) == 0;
}

std::unique_ptr<at::ObserverContext> OpStarted(const at::RecordFunction& fn) {
  if (BackwardNode(fn)) return nullptr;
  if (counting && op_depth == 0) ++(*counting)[fn.name()];
  ++op_depth;
  return nullptr;
}
void OpEnded(const at::RecordFunction& fn, at::ObserverContext*) {
  if (!BackwardNode(fn)) --op_depth;
}
}  // namespace

OpCounter::OpCounter() {
  counting = &counts_;
  op_depth = 0;
  handle_ = at::addThreadLocalCallback(
      at::RecordFunctionCallback(&OpStarted, &OpEnded).scopes({at::RecordScope::FUNCTION}));
}

OpCounter::~OpCounter() {
  at::removeCallback(handle_);
  counting = nullptr;
}

int64_t OpCounter::total() const {
  int64_t n = 0;
  for (const auto& [name, count] : counts_) n += count;
  return n;
}

std::string OpCounter::Describe() const {
  std::string out;
  for (const auto& [name, count] : counts_) out += (out.empty() ? "" : ", ") + name + " " + std::to_string(count);
  return out;
}

// ---- profiling a window ---------------------------------------------------------
// KinetoEvent's clock is in microseconds in 1.13 (startUs, durationUs) and in
// nanoseconds from 2.x on (startNs, durationNs): whichever the event has is read.
#if PROTOCOL_WITH_TORCH_PROFILER
namespace {
template <typename E, typename = void>
struct HasNanoseconds : std::false_type {};
template <typename E>
struct HasNanoseconds<E, std::void_t<decltype(std::declval<const E&>().durationNs())>> : std::true_type {};

template <typename E>
std::pair<int64_t, int64_t> StartAndDurationNs(const E& e) {
  if constexpr (HasNanoseconds<E>::value) {
    return {static_cast<int64_t>(e.startNs()), static_cast<int64_t>(e.durationNs())};
  } else {
    return {static_cast<int64_t>(e.startUs()) * 1000, static_cast<int64_t>(e.durationUs()) * 1000};
  }
}

std::set<torch::profiler::impl::ActivityType> ProfiledActivities(bool device_kernels) {
  std::set<torch::profiler::impl::ActivityType> activities{torch::profiler::impl::ActivityType::CPU};
  if (device_kernels) activities.insert(torch::profiler::impl::ActivityType::CUDA);
  return activities;
}

// One profiler at a time, enforced here: libtorch 1.13 refuses a second one, 2.6 does not.
std::atomic<bool> op_profiler_running{false};
// Frees the one profiler's place when it goes, however the stop ends.
struct ProfilerPlaceRelease {
  ~ProfilerPlaceRelease() { op_profiler_running = false; }
};
}  // namespace

OpProfiler::OpProfiler(bool device_kernels) {
  bool idle = false;
  TORCH_CHECK(op_profiler_running.compare_exchange_strong(idle, true), "OpProfiler: a profiler is already running");
  try {
    const torch::profiler::impl::ProfilerConfig config(torch::profiler::impl::ProfilerState::KINETO);
    const auto activities = ProfiledActivities(device_kernels);
    torch::autograd::profiler::prepareProfiler(config, activities);
    torch::autograd::profiler::enableProfiler(config, activities);
  } catch (...) {
    op_profiler_running = false;
    throw;
  }
  running_ = true;
}

OpProfiler::~OpProfiler() {
  if (!running_) return;
  ProfilerPlaceRelease release;
  try {
    (void)torch::autograd::profiler::disableProfiler();
  } catch (const std::exception&) {  // a destructor does not throw; the spans are dropped anyway
  }
}

std::vector<ProfiledSpan> OpProfiler::Stop() {
  std::vector<ProfiledSpan> spans;
  if (!running_) return spans;
  running_ = false;
  const auto result = [] {
    ProfilerPlaceRelease release;
    return torch::autograd::profiler::disableProfiler();
  }();
  if (!result) return spans;
  spans.reserve(result->events().size());
  for (const auto& e : result->events()) {
    ProfiledSpan span;
    span.name = e.name();
    span.on_device = e.deviceType() == c10::DeviceType::CUDA;
    span.lane = span.on_device ? e.deviceResourceId() : static_cast<int64_t>(e.startThreadId());
    std::tie(span.start_ns, span.duration_ns) = StartAndDurationNs(e);
    spans.push_back(std::move(span));
  }
  return spans;
}
#else  // a libtorch without the profiler's header
OpProfiler::OpProfiler(bool) { TORCH_CHECK(false, "this libtorch has no profiler (torch/csrc/autograd/profiler_kineto.h)"); }
OpProfiler::~OpProfiler() = default;
std::vector<ProfiledSpan> OpProfiler::Stop() { return {}; }
#endif

// ---- watching the CPU allocator ---------------------------------------------------
// c10::Allocator::allocate is const in 1.13 and not from 2.3 on, where
// copy_data joined it: the wrapper defines both forms of allocate and
// copy_data, and whichever the base declares is the override.
//
// Each block it hands out has its data pointer as its context, as
// c10::Allocator::raw_allocate requires (ATen's CPU matmul takes scratch
// memory that way on some paths, and asserted on a wrapped block); the base
// allocator's block and the size wait in a table keyed by that pointer until
// the block is freed.

namespace {
std::atomic<int64_t> cpu_live{0}, cpu_peak{0}, cpu_largest{0};

void RaiseTo(std::atomic<int64_t>& max, int64_t value) {
  int64_t seen = max.load();
  while (value > seen && !max.compare_exchange_weak(seen, value)) {
  }
}

struct WatchedBlock {
  c10::DataPtr inner;
  int64_t bytes;
};
std::mutex watched_mutex;
std::unordered_map<void*, WatchedBlock>& Watched() {
  static auto* blocks = new std::unordered_map<void*, WatchedBlock>();  // kept: freed blocks may outlive main
  return *blocks;
}
void WatchedDelete(void* data) {
  c10::DataPtr inner;  // freed after the table's lock is let go
  {
    std::lock_guard<std::mutex> lock(watched_mutex);
    auto it = Watched().find(data);
    if (it == Watched().end()) return;
    cpu_live -= it->second.bytes;
    inner = std::move(it->second.inner);
    Watched().erase(it);
  }
}

class WatchingAllocator final : public c10::Allocator {
 public:
  explicit WatchingAllocator(c10::Allocator* base) : base_(base) {}
  c10::DataPtr allocate(size_t n) const { return Wrap(n); }
  c10::DataPtr allocate(size_t n) { return Wrap(n); }
  void copy_data(void* dest, const void* src, std::size_t count) const { std::memcpy(dest, src, count); }
  c10::DeleterFnPtr raw_deleter() const override { return &WatchedDelete; }
  c10::Allocator* base() const { return base_; }

 private:
  c10::DataPtr Wrap(size_t n) const {
    c10::DataPtr inner = base_->allocate(n);
    void* data = inner.get();
    if (data == nullptr) return inner;  // nothing allocated (n == 0): nothing to count
    const c10::Device device = inner.device();
    const auto bytes = static_cast<int64_t>(n);
    {
      std::lock_guard<std::mutex> lock(watched_mutex);
      Watched().emplace(data, WatchedBlock{std::move(inner), bytes});
    }
    RaiseTo(cpu_peak, cpu_live += bytes);
    RaiseTo(cpu_largest, bytes);
    return c10::DataPtr(data, data, &WatchedDelete, device);
  }
  c10::Allocator* base_;
};
WatchingAllocator* watching = nullptr;
constexpr uint8_t kWatchPriority = 255;  // above any allocator registered at start-up
}  // namespace

CpuMemoryWatch::CpuMemoryWatch() {
  if (!watching) watching = new WatchingAllocator(c10::GetCPUAllocator());  // kept: storages point to it
  start_ = cpu_live.load();
  cpu_peak = start_;
  cpu_largest = 0;
  c10::SetCPUAllocator(watching, kWatchPriority);
}

CpuMemoryWatch::~CpuMemoryWatch() { c10::SetCPUAllocator(watching->base(), kWatchPriority); }

int64_t CpuMemoryWatch::peak_bytes() const { return cpu_peak.load() - start_; }
int64_t CpuMemoryWatch::live_bytes() const { return cpu_live.load() - start_; }
int64_t CpuMemoryWatch::largest_bytes() const { return cpu_largest.load(); }

// ---- storage ------------------------------------------------------------------
// StorageImpl::set_data_ptr_noswap and set_nbytes(size_t) exist in 1.13 and 2.x.

void StorageFree(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  s->set_data_ptr_noswap(at::DataPtr(nullptr, t.device()));
  s->set_nbytes(0);
}

at::Tensor StorageRefill(const at::Tensor& t) {
  c10::StorageImpl* s = t.storage().unsafeGetStorageImpl();
  const size_t bytes = static_cast<size_t>(t.numel()) * t.element_size();
  s->set_data_ptr_noswap(s->allocator()->allocate(bytes));
  s->set_nbytes(bytes);
  return at::empty({0}, t.options()).set_(t.storage(), 0, t.sizes(), t.strides());
}

int64_t StorageBytes(const at::Tensor& t) { return static_cast<int64_t>(t.storage().nbytes()); }

// ---- c10d -------------------------------------------------------------------

// 1.13: the concrete groups derive from c10d::ProcessGroup; 2.x: from c10d::Backend.
#if PROTOCOL_TORCH_2
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

struct CommStore {
  c10::intrusive_ptr<c10d::Store> store;
  int port = 0;  // the TCP store's (0 for a prefix of it)
};

#if PROTOCOL_WITH_NCCL
// One NCCL collective waited on the compute stream: events around the wait
// (the stall) and the work, whose own events time it; read once completed.
struct NcclTiming {
  std::shared_ptr<at::cuda::CUDAEvent> before, after;
  c10::intrusive_ptr<c10d::Work> work;
};
#endif

struct CommGroup {
  c10::intrusive_ptr<GroupBase> group;
  int size = 1;
  int rank = 0;
  std::string backend;
  double exposed_seconds = 0;    // stalled waiting, summed
  double in_flight_seconds = 0;  // issue to end, summed
#if PROTOCOL_WITH_NCCL
  std::vector<NcclTiming> unread;  // NCCL timings not read yet
#endif
};

// What a PendingCollective owns: the work, the tensors it reads and writes,
// what is left to do once it ended, and when it was issued and ended.
struct CommWork {
  CommGroup* group = nullptr;
  c10::intrusive_ptr<c10d::Work> work;
  std::vector<at::Tensor> keep;  // alive until the collective ended
  std::function<void()> finish;  // after the end: Gloo 1.13's slice copy
  std::chrono::steady_clock::time_point issued;
  int64_t bytes = 0;             // what this rank sends (the ring volume)
  // Set by Gloo's thread when it marks the work complete (its future's callback).
  std::shared_ptr<std::atomic<int64_t>> ended_ns = std::make_shared<std::atomic<int64_t>>(-1);
};

namespace {

int64_t Bytes(const at::Tensor& t) { return t.numel() * static_cast<int64_t>(t.element_size()); }

int64_t SteadyNs(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

// A collective just issued on `g`. On Gloo the completion time is recorded by
// the work's future, which Gloo's thread completes when the work ends (NCCL's
// future completes at launch: NCCL is timed by events instead).
PendingCollective Issued(CommGroup& g, c10::intrusive_ptr<c10d::Work> work, int64_t bytes, std::vector<at::Tensor> keep,
                         std::chrono::steady_clock::time_point issued, std::function<void()> finish = nullptr) {
  auto w = std::make_unique<CommWork>();
  w->group = &g;
  w->work = std::move(work);
  w->keep = std::move(keep);
  w->finish = std::move(finish);
  w->issued = issued;
  w->bytes = bytes;
  if (g.backend == "gloo") {
    std::shared_ptr<std::atomic<int64_t>> ended = w->ended_ns;
    // Not every Gloo work has a future (libtorch 2.11 refuses getFuture on
    // some: "Work::getFuture not implemented"); without one the collective
    // counts as in flight until Wait returns, an upper bound.
    try {
      w->work->getFuture()->addCallback(
          [ended](c10::ivalue::Future&) { ended->store(SteadyNs(std::chrono::steady_clock::now())); });
    } catch (const c10::Error&) {
    }
  }
  return PendingCollective(std::move(w));
}

}  // namespace

PendingCollective::PendingCollective() = default;
PendingCollective::PendingCollective(std::unique_ptr<CommWork> work)
    : work_(std::move(work)), bytes_(work_ ? work_->bytes : 0) {}
PendingCollective::PendingCollective(PendingCollective&& other) noexcept
    : work_(std::move(other.work_)), bytes_(other.bytes_) {}
PendingCollective& PendingCollective::operator=(PendingCollective&& other) noexcept {
  if (this != &other) {
    try {
      Wait();
    } catch (...) {  // a failed collective: the group's next collective reports the failure
    }
    work_ = std::move(other.work_);
    bytes_ = other.bytes_;
  }
  return *this;
}
PendingCollective::~PendingCollective() {
  try {
    Wait();
  } catch (...) {  // a failed collective: the group's next collective reports the failure
  }
}

bool PendingCollective::pending() const { return work_ != nullptr; }

void PendingCollective::Wait() {
  if (!work_) return;
  std::unique_ptr<CommWork> w = std::move(work_);
  CommGroup& g = *w->group;
#if PROTOCOL_WITH_NCCL
  if (g.backend == "nccl") {
    // The CPU does not block: the compute stream waits for NCCL's. The stall
    // is the time from the stream reaching the wait to its passing it.
    auto before = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    auto after = std::make_shared<at::cuda::CUDAEvent>(cudaEventDefault);
    before->record();
    w->work->wait();
    after->record();
    g.unread.push_back({before, after, w->work});
    if (w->finish) w->finish();
    return;
  }
#endif
  const auto start = std::chrono::steady_clock::now();
  w->work->wait();
  const int64_t waited_ns = SteadyNs(std::chrono::steady_clock::now());
  if (w->finish) w->finish();
  g.exposed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const int64_t ended = w->ended_ns->load();
  const int64_t end_ns = ended >= 0 ? std::min(ended, waited_ns) : waited_ns;
  g.in_flight_seconds += static_cast<double>(std::max<int64_t>(0, end_ns - SteadyNs(w->issued))) * 1e-9;
}

namespace {

std::shared_ptr<CommStore> CommStoreOpen(const std::string& host, int port, bool is_server, int world,
                                         int64_t timeout_ms) {
  c10d::TCPStoreOptions o;
  o.port = static_cast<std::uint16_t>(port);
  o.isServer = is_server;
  o.numWorkers = static_cast<std::size_t>(world);
  // The server never waits for its clients here: with port 0 they learn the
  // port only after this returns (rendezvous.h).
  o.waitWorkers = !is_server;
  o.timeout = std::chrono::milliseconds(timeout_ms);
  auto out = std::make_shared<CommStore>();
  c10::intrusive_ptr<c10d::TCPStore> tcp;
#if PROTOCOL_TCPSTORE_LIBUV
  // The libuv store (the default) where the build has it; Debian's libtorch
  // is built without libuv and refuses it: the classic store then.
  try {
    tcp = c10::make_intrusive<c10d::TCPStore>(host, o);
  } catch (const c10::Error& e) {
    if (std::string(e.what()).find("libuv") == std::string::npos) throw;
    o.useLibUV = false;
    tcp = c10::make_intrusive<c10d::TCPStore>(host, o);
  }
#else
  tcp = c10::make_intrusive<c10d::TCPStore>(host, o);
#endif
  out->port = tcp->getPort();
  out->store = tcp;
  return out;
}

}  // namespace

std::shared_ptr<CommStore> CommStoreListen(const std::string& host, int port, int world, int64_t timeout_ms) {
  return CommStoreOpen(host, port, /*is_server=*/true, world, timeout_ms);
}

std::shared_ptr<CommStore> CommStoreJoin(const std::string& host, int port, int world, int64_t timeout_ms) {
  return CommStoreOpen(host, port, /*is_server=*/false, world, timeout_ms);
}

int CommStorePort(const CommStore& store) { return store.port; }

std::shared_ptr<CommStore> CommStorePrefix(const std::shared_ptr<CommStore>& base, const std::string& prefix) {
  auto out = std::make_shared<CommStore>();
  out->store = c10::make_intrusive<c10d::PrefixStore>(prefix, base->store);
  return out;
}

std::shared_ptr<CommGroup> CommGroupCreate(const std::shared_ptr<CommStore>& store, int rank, int size, bool cuda,
                                           int64_t timeout_ms) {
  auto out = std::make_shared<CommGroup>();
  out->size = size;
  out->rank = rank;
  const auto timeout = std::chrono::milliseconds(timeout_ms);
#if PROTOCOL_WITH_NCCL
  if (cuda) {
    // Each collective's start and end events (read in CommInFlightSeconds).
    setenv("TORCH_NCCL_ENABLE_TIMING", "1", /*overwrite=*/0);
    auto o = c10d::ProcessGroupNCCL::Options::create();
    o->timeout = timeout;
    out->group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store->store, rank, size, o);
    out->backend = "nccl";
    return out;
  }
#else
  TORCH_CHECK(!cuda, "this build has no NCCL: CUDA tensors cannot be communicated");
#endif
  auto o = c10d::ProcessGroupGloo::Options::create(timeout);
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  o->devices.push_back(ifname && *ifname ? c10d::ProcessGroupGloo::createDeviceForInterface(ifname)
                                         : c10d::ProcessGroupGloo::createDefaultDevice());
  // Two threads: a prefetched all-gather and a gradient reduction in flight together.
  o->threads = 2;
  out->group = c10::make_intrusive<c10d::ProcessGroupGloo>(store->store, rank, size, o);
  out->backend = "gloo";
  return out;
}

int CommGroupSize(const CommGroup& group) { return group.size; }
int CommGroupRank(const CommGroup& group) { return group.rank; }
std::string CommBackendName(const CommGroup& group) { return group.backend; }

namespace {

// NCCL: the timings of waited collectives whose events have completed by now
// (all of them after a device synchronisation).
void ReadNcclTimings(CommGroup& g) {
#if PROTOCOL_WITH_NCCL
  std::vector<NcclTiming> still;
  for (NcclTiming& t : g.unread) {
    if (!t.after->query()) {
      still.push_back(std::move(t));
      continue;
    }
    g.exposed_seconds += std::max(0.0f, t.before->elapsed_time(*t.after)) * 1e-3;
    try {
      g.in_flight_seconds += std::max(0.0f, t.work->getDuration()) * 1e-3;
    } catch (const c10::Error&) {  // timing not enabled for this group: the stall is all that is known
    }
  }
  g.unread = std::move(still);
#else
  (void)g;
#endif
}

}  // namespace

double CommExposedSeconds(CommGroup& group) {
  ReadNcclTimings(group);
  return group.exposed_seconds;
}

double CommInFlightSeconds(CommGroup& group) {
  ReadNcclTimings(group);
  return group.in_flight_seconds;
}

PendingCollective AllGatherFlatAsync(CommGroup& g, at::Tensor& out, const at::Tensor& shard) {
  if (g.size == 1) {
    out.copy_(shard.reshape({-1}));
    return PendingCollective();
  }
  const auto issued = std::chrono::steady_clock::now();
  const int64_t sent = (g.size - 1) * Bytes(shard);
  at::Tensor input = shard.contiguous();
#if PROTOCOL_TORCH_2
  if (g.backend == "nccl" || PROTOCOL_GLOO_FLAT) {
    at::Tensor flat_out = out.view({-1});
    at::Tensor flat_in = input.view({-1});
    return Issued(g, g.group->_allgather_base(flat_out, flat_in), sent, {flat_out, flat_in}, issued);
  }
#endif
  // Gloo gathers into its own flat buffer and copies each rank's part into
  // the outputs: give it `out`'s slices, so no further copy is held.
  std::vector<at::Tensor> inputs{input};
  std::vector<std::vector<at::Tensor>> outputs(1);
  const int64_t n = input.numel();
  at::Tensor flat = out.view({-1});
  for (int r = 0; r < g.size; ++r) outputs[0].push_back(flat.narrow(0, r * n, n).view(input.sizes()));
  return Issued(g, g.group->allgather(outputs, inputs), sent, {flat, input}, issued);
}

PendingCollective ReduceScatterSumAsync(CommGroup& g, at::Tensor& shard_out, at::Tensor& full) {
  if (g.size == 1) {
    shard_out.copy_(full.reshape({-1}));
    return PendingCollective();
  }
  const auto issued = std::chrono::steady_clock::now();
#if PROTOCOL_TORCH_2
  if (g.backend == "nccl") {
    c10d::ReduceScatterOptions o;
    o.reduceOp = c10d::ReduceOp::SUM;
    at::Tensor flat_out = shard_out.view({-1});
    at::Tensor flat_in = full.view({-1});
    return Issued(g, g.group->_reduce_scatter_base(flat_out, flat_in, o), (g.size - 1) * Bytes(full) / g.size,
                  {flat_out, flat_in}, issued);
  }
#endif
  // Gloo: all-reduce the whole buffer, then keep this rank's slice. (Gloo's own
  // _reduce_scatter_base, libtorch 2.6 on, all-reduces a copy of the input: the
  // same bytes on the wire, plus that copy.)
  std::vector<at::Tensor> tensors{full};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  const int64_t n = shard_out.numel();
  at::Tensor out = shard_out, in = full;
  const int rank = g.rank;
  return Issued(g, g.group->allreduce(tensors, o), 2 * (g.size - 1) * Bytes(full) / g.size, {shard_out, full}, issued,
                [out, in, n, rank]() mutable { out.copy_(in.reshape({-1}).narrow(0, rank * n, n)); });
}

PendingCollective AllReduceSumAsync(CommGroup& g, at::Tensor& tensor) {
  if (g.size == 1) return PendingCollective();
  const auto issued = std::chrono::steady_clock::now();
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions o;
  o.reduceOp = c10d::ReduceOp::SUM;
  return Issued(g, g.group->allreduce(tensors, o), 2 * (g.size - 1) * Bytes(tensor) / g.size, {tensor}, issued);
}

int64_t AllGatherFlat(CommGroup& g, at::Tensor& out, const at::Tensor& shard) {
  PendingCollective p = AllGatherFlatAsync(g, out, shard);
  p.Wait();
  return p.bytes();
}

int64_t ReduceScatterSum(CommGroup& g, at::Tensor& shard_out, at::Tensor& full) {
  PendingCollective p = ReduceScatterSumAsync(g, shard_out, full);
  p.Wait();
  return p.bytes();
}

int64_t AllReduceSum(CommGroup& g, at::Tensor& tensor) {
  PendingCollective p = AllReduceSumAsync(g, tensor);
  p.Wait();
  return p.bytes();
}

int64_t Broadcast(CommGroup& g, at::Tensor& tensor, int root) {
  if (g.size == 1) return 0;
  std::vector<at::Tensor> tensors{tensor};
  c10d::BroadcastOptions o;
  o.rootRank = root;
  // A ring broadcast: every rank but the last forwards the tensor once.
  const int64_t sent = g.rank == (root + g.size - 1) % g.size ? 0 : Bytes(tensor);
  PendingCollective p = Issued(g, g.group->broadcast(tensors, o), sent, {tensor}, std::chrono::steady_clock::now());
  p.Wait();
  return p.bytes();
}

void Barrier(CommGroup& g) {
  if (g.size == 1) return;
  PendingCollective p = Issued(g, g.group->barrier(), 0, {}, std::chrono::steady_clock::now());
  p.Wait();
}

}  // namespace compat
}  // namespace native
}  // namespace protocol
