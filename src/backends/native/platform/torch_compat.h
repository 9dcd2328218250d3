#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_TORCH_COMPAT_H_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_TORCH_COMPAT_H_

// Every difference between libtorch 1.13 (Debian, CPU) and libtorch 2.x (the
// CUDA wheel) lives behind these functions; no other file tests a version.
// The native code uses ATen (<ATen/ATen.h>) rather than <torch/torch.h>: it
// needs tensors and autograd, not torch::nn, and compiles in a quarter of the time.

#include <ATen/ATen.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace protocol {
namespace native {
namespace compat {

// softmax(q·kᵀ/√HD + mask)·v.  q: (B,NH,T,HD); k, v: (B,NKV,S,HD), NKV
// dividing NH (grouped-query attention: query head h reads key/value head
// h / (NH/NKV)).  is_causal: query i sees keys 0..i (REQUIRES T == S).  mask:
// optional bool (T,S), true = may attend; used when not causal.
// libtorch 2.x: at::scaled_dot_product_attention (flash / memory-efficient
// kernels on CUDA). Grouped heads go to it as they are (enable_gqa) where
// libtorch (2.5 on) would run them on flash or memory-efficient attention
// (SdpaTakesGroupedHeads); otherwise each key/value head is repeated for its
// NH/NKV query heads first (a copy of K and V at NH heads). 1.13: the same
// math written out over repeated heads, softmax in float32.
at::Tensor ScaledDotProductAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                     bool is_causal, const std::optional<at::Tensor>& mask);
// Whether ScaledDotProductAttention passes these grouped K/V (NKV < NH, no
// mask) to libtorch without repeating them; false when NKV == NH.
bool SdpaTakesGroupedHeads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal);

std::string TorchVersion();  // "1.13.0"
// A dtype as PyTorch users write it: "float32", "bfloat16", "float16", "float64"
// (c10::toString says "Float", "BFloat16", ...); other types as c10 names them.
std::string DtypeName(at::ScalarType dtype);
// What this binary was compiled with: "libtorch 2.6.0, CUDA 12.4, NCCL 2.22.3"
// or "libtorch 1.13.0, CPU only" (the build, not the machine's devices).
std::string BuildFeatures();
// The CUDA runtime the build was compiled against, "12.4"; empty without CUDA.
std::string CudaRuntimeVersion();
// The NCCL library this process has loaded, "2.22.3" (ncclGetVersion); the
// headers' version where it cannot be asked; empty in a build without NCCL.
std::string NcclVersion();
// The GPU architectures libtorch's own kernels were compiled for, read from
// libtorch_cuda at configure time: "sm_50,sm_60,…,sm_90"; "not read" where the
// build had no cuobjdump; empty without CUDA.
std::string TorchCudaArchitectures();

// ---- cuDNN: never called ----------------------------------------------------
// The CUDA image's libcudnn.so.9 is a stub that aborts on any call (scripts/
// cudnn-stub.sh): Debian ships cuDNN only as an installer that downloads it.
// The model needs none of it: no convolution, and attention has flash and
// memory-efficient kernels. Called once at each program's start, before any
// tensor work: turns off libtorch's cuDNN (at::Context::setUserEnabledCuDNN)
// and SDPA's cuDNN attention backend (libtorch 2.3 on), in every build alike.
void TurnOffCudnn();
// Whether TurnOffCudnn's settings are in force in this process.
bool CudnnTurnedOff();
// The SDPA kernel libtorch picks for these inputs (as ScaledDotProductAttention
// passes them, grouped or repeated, no mask): "flash", "efficient", "cudnn", "math", "overrideable";
// "math" on 1.13, where attention is written out.
std::string SdpaBackendFor(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool is_causal);
bool CudaAvailable();
// The current CUDA device's name, e.g. "NVIDIA H100 80GB HBM3"; empty without CUDA.
std::string CudaDeviceName();
// Makes CUDA device `index` this thread's current device (the one NCCL and the
// peak-memory counters below use). No-op without CUDA.
void CudaSetDevice(int index);
// Peak bytes allocated by the caching allocator since the last reset; nullopt without CUDA.
std::optional<int64_t> CudaPeakMemoryBytes();
void CudaResetPeakMemory();
// The cudaStream_t (as void*) that ATen queues work on for CUDA device
// `device`: a kernel of this project launched there runs in order with the
// ops around it. nullptr without CUDA or for another device type.
void* CudaCurrentStream(const at::Device& device);
// Waits for queued device work, so that a clock read after it is meaningful. No-op on CPU.
void DeviceSynchronize(const at::Device& device);

// In place: every tensor of `tensors` times the one-element tensor `factor`
// (on their device), without reading it back: one multi-tensor kernel where
// libtorch has it (2.1 on: _foreach_mul_ with a tensor), one kernel per tensor
// on 1.13.
void ForeachMulByScalarTensor(const std::vector<at::Tensor>& tensors, const at::Tensor& factor);
// In place: dst[i] = src[i] (same shapes): one multi-tensor kernel from 2.2 on
// (_foreach_copy_), one copy per tensor before.
void ForeachCopy(const std::vector<at::Tensor>& dst, const std::vector<at::Tensor>& src);

// ---- AdamW in one pass ----------------------------------------------------------
// The hyperparameters of one AdamW step; `step` counts this one (t ≥ 1).
struct AdamWHyper {
  double lr = 0, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  int64_t step = 1;
};
// True where FusedAdamW runs for tensors on `device`: libtorch's
// _fused_adamw_ (CUDA from 2.1, the CPU from 2.4), or on libtorch 1.13's CPU a
// loop of this adapter with that kernel's arithmetic. Elsewhere (1.13 on
// CUDA, 2.1–2.3 on the CPU) the caller steps with multi-tensor ops.
bool FusedAdamWAvailable(const at::Device& device);
// AdamW as torch.optim.AdamW(fused=True) steps each params[i] (float32,
// contiguous; grads[i], m[i], v[i] alike), reading and writing each element
// once:
//   p ← p·(1 − lr·λ);  m ← β1·m + (1 − β1)·g;  v ← β2·v + (1 − β2)·g²
//   p ← p − lr/(1 − β1ᵗ) · m / (√v / √(1 − β2ᵗ) + ε)
// REQUIRES: FusedAdamWAvailable(params[0].device()).
void FusedAdamW(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                const std::vector<at::Tensor>& m, const std::vector<at::Tensor>& v, const AdamWHyper& hyper);

// ---- RMSNorm in one kernel ---------------------------------------------------------
// True where libtorch runs RMSNorm over x's last dimension as one fused kernel
// with a fused backward: x on CUDA, weight of x's dtype, and a libtorch whose
// dispatcher has aten::_fused_rms_norm for CUDA (2.9 on). False on 1.13, on
// the CPU and on other CUDA builds; rms_norm.h's autograd function serves there.
bool AtenFusedRmsNormAvailable(const at::Tensor& x, const at::Tensor& weight);
// at::rms_norm(x, {C}, weight, eps): weight · x / √(mean(x²) + eps), the
// statistic in float32. Its values may differ from rms_norm.h's form by one
// rounding to x's dtype; tests/backends/gpu_test.cc holds it to that form and
// checks that its backward is the fused one. REQUIRES: AtenFusedRmsNormAvailable.
at::Tensor AtenFusedRmsNorm(const at::Tensor& x, const at::Tensor& weight, double eps);

// ---- reading device values on the host -------------------------------------
// Every value a training step reads back from its tensors goes through here. A
// read waits for the device (on a GPU the host cannot run ahead past it), so
// the count of reads is the count of such stalls: a step reads its loss and
// gradient norm in one read, and nothing per tensor.
//
// The values of `t` (a few elements, any dtype, any device) as doubles, in one copy.
std::vector<double> ReadToHost(const at::Tensor& t);
// ReadToHost calls so far in this process (tests and benchmarks count them per step).
int64_t HostReads();

// ---- CUDA graphs ----------------------------------------------------------------
// A step recorded once and replayed (at::cuda::CUDAGraph): a replay launches
// every kernel of the step from one host call, with the arguments and the
// memory of the capture. The step must not read device values on the host or
// change a shape from one call to the next; its persistent tensors must be
// allocated before the capture (what it allocates inside comes from the
// graph's own pool and is reused by each replay).
class CudaGraph {
 public:
  CudaGraph();
  ~CudaGraph();
  CudaGraph(const CudaGraph&) = delete;
  CudaGraph& operator=(const CudaGraph&) = delete;
  // Runs `step` once on a side stream of `device` (a warm-up that also makes
  // what the kernels create on first use, such as cuBLAS's handle), then
  // records it without running it: after Capture, step's effects happened
  // exactly once. False (and `step` not run) in a build without CUDA or for
  // a non-CUDA device.
  bool Capture(const std::function<void()>& step, const at::Device& device);
  // Runs the recorded step on the current stream. REQUIRES: Capture returned true.
  void Replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// ---- counting the ATen ops a piece of code runs ------------------------------
// The ops this thread dispatches while the object lives, through ATen's
// RecordFunction observer: only the outermost ones (an aten::linear that
// calls aten::matmul and aten::mm counts once), by name, "aten::add" → 2.
// In a backward, the ops each node runs (the engine's record of the node is
// not counted as one).
// Each op is one kernel launch or more on a GPU: the count is what a decode
// step costs the host. One counter per thread at a time.
class OpCounter {
 public:
  OpCounter();
  ~OpCounter();
  OpCounter(const OpCounter&) = delete;
  OpCounter& operator=(const OpCounter&) = delete;
  const std::map<std::string, int64_t>& counts() const { return counts_; }
  int64_t total() const;
  // "aten::add 2, aten::mm 3, …": the counts in name order.
  std::string Describe() const;

 private:
  std::map<std::string, int64_t> counts_;
  uint64_t handle_ = 0;
};

// ---- profiling a window -------------------------------------------------------
// One span libtorch's profiler recorded: an op on the host (lane: its thread),
// or a kernel, copy or memset on a CUDA device (lane: its stream).
struct ProfiledSpan {
  std::string name;
  bool on_device = false;
  int64_t lane = 0;
  int64_t start_ns = 0;     // on the profiler's clock; differences are what count
  int64_t duration_ns = 0;
};
// libtorch's profiler while the object lives: every op the process dispatches
// (a profiled thread's, and the autograd engine's for it) and, with
// device_kernels on a libtorch that records them (Kineto with CUPTI, as in the
// CUDA wheels), every kernel's span on the device. A libtorch built without
// Kineto (Debian's 1.13) records the host's ops only. One profiler per process
// at a time; the spans come back from Stop, or are dropped by the destructor.
// Throws c10::Error where the profiler cannot start (an OpProfiler already
// running, whatever the libtorch's own rule, or a libtorch without its header).
class OpProfiler {
 public:
  explicit OpProfiler(bool device_kernels);
  ~OpProfiler();
  OpProfiler(const OpProfiler&) = delete;
  OpProfiler& operator=(const OpProfiler&) = delete;
  std::vector<ProfiledSpan> Stop();

 private:
  bool running_ = false;
};

// ---- watching the CPU allocator ------------------------------------------------
// The peak of the bytes held by CPU tensors while the object lives, above what
// they held when it was made, through a wrapper of ATen's CPU allocator (freed
// bytes are counted whenever their tensor goes, even after the watch ends).
// Counts every thread's allocations. One watch at a time per process; a test
// or benchmark tool, not for a case's figures (peak RSS serves those).
class CpuMemoryWatch {
 public:
  CpuMemoryWatch();
  ~CpuMemoryWatch();
  CpuMemoryWatch(const CpuMemoryWatch&) = delete;
  CpuMemoryWatch& operator=(const CpuMemoryWatch&) = delete;
  int64_t peak_bytes() const;      // the peak so far, above the start
  int64_t live_bytes() const;      // held now, above the start (what an autograd graph keeps, say)
  int64_t largest_bytes() const;   // the largest single allocation so far

 private:
  int64_t start_ = 0;
};

// ---- storage of a gathered buffer -----------------------------------------
// FSDP frees a unit's gathered parameters after forward while the autograd
// graph still holds views of them, and fills the same storage again before
// backward (PyTorch FSDP's _free_storage / _alloc_storage).
// REQUIRES for both: t is contiguous with storage offset 0 and owns its storage
// (made by at::empty, not from external memory).
//
// Releases t's memory; t and every view of it keep their sizes and must not be
// read until StorageRefill.
void StorageFree(const at::Tensor& t);
// Allocates t's storage again (t.numel() elements, contents undefined) and
// returns a new tensor over it with t's sizes and its OWN version counter:
// writing through it does not bump the version of the views autograd saved.
at::Tensor StorageRefill(const at::Tensor& t);
// Bytes t's storage currently holds (0 after StorageFree).
int64_t StorageBytes(const at::Tensor& t);

// ---- c10d collectives ------------------------------------------------------
// Opaque handles over torch's c10d: a key-value store for rendezvous (TCPStore,
// or a PrefixStore over one) and a process group (Gloo for CPU tensors, NCCL
// for CUDA tensors where the build has it). Creating them throws c10::Error
// (the caller catches it where it wraps the whole worker).
//
// libtorch 1.13 Gloo has no flat all-gather, no reduce-scatter and no AVG:
// AllGatherFlat is a list all-gather into `out`'s slices there, and callers
// average by SUM then divide. On Gloo ReduceScatterSum is always an all-reduce
// + slice: Gloo's _reduce_scatter_base (libtorch 2.6 on) is itself an
// all-reduce, of a copy of the input (ProcessGroupGloo::
// reduce_scatter_tensor_coalesced), so it would send the same bytes and hold
// one more buffer. NCCL takes the flat collectives (_allgather_base,
// _reduce_scatter_base), as does Gloo's all-gather from libtorch 2.6 on.
//
// Each collective returns the bytes THIS rank sends for the operation it
// actually issued, counted as the ring algorithm's volume (a model of the
// traffic, not a NIC counter):
//   all-gather of a shard of s bytes over W ranks   (W−1)·s
//   reduce-scatter of n bytes                       (W−1)/W·n
//   all-reduce of n bytes                           2·(W−1)/W·n
// so an all-reduce standing in for a reduce-scatter counts twice the bytes.
//
// Every collective has an asynchronous form (…Async) that returns once the
// collective is issued, as a PendingCollective; the plain form is the same
// collective waited at once. Time is counted per group in two figures:
//   exposed     the time this rank was stalled waiting for a collective to end:
//               on Gloo the wall time the calling thread spent in Wait; on
//               NCCL the time the compute stream stood still at the wait (CUDA
//               events before and after it)
//   in flight   Σ over the collectives of (end − issue): on Gloo from the
//               issue to the moment Gloo's thread marked it complete; on NCCL
//               the collective's own start and end events (TORCH_NCCL_ENABLE_TIMING)
// A collective waited at once has exposed ≈ in flight; one issued early and
// waited after other work has exposed < in flight: the difference was hidden.
struct CommStore;
struct CommGroup;
struct CommWork;

// Whether Gloo is taken to reduce bfloat16 tensors: false on libtorch 1.13
// (its all-reduce fails with "Invalid scalar type", seen here); true on 2.x
// (not run here: where its Gloo refuses too, the case fails with that message).
bool GlooReducesBfloat16();

// The rendezvous store's server (rank 0), listening on `port` on every
// interface; port 0: a port the kernel picks, bound from that moment on
// (CommStorePort reads it). `host` is an address of this host that its own
// client connects to (MASTER_ADDR). Returns at once: the clients meet the
// server through the groups' keys, each wait bounded by `timeout_ms`. Throws
// c10::Error when the port cannot be bound.
std::shared_ptr<CommStore> CommStoreListen(const std::string& host, int port, int world, int64_t timeout_ms);
// A client of the server on host:port (ranks other than 0).
std::shared_ptr<CommStore> CommStoreJoin(const std::string& host, int port, int world, int64_t timeout_ms);
// The port the server listens on, or the port a client joined.
int CommStorePort(const CommStore& store);
// Keys of the result live under `prefix` in `base` (subgroups of one store).
std::shared_ptr<CommStore> CommStorePrefix(const std::shared_ptr<CommStore>& base, const std::string& prefix);
// A process group of `size` ranks; `cuda`: NCCL (only where built), else Gloo.
// Gloo binds to the interface named by GLOO_SOCKET_IFNAME when set, else to
// this host's name (loopback when the name does not resolve).
std::shared_ptr<CommGroup> CommGroupCreate(const std::shared_ptr<CommStore>& store, int rank, int size, bool cuda,
                                           int64_t timeout_ms);
int CommGroupSize(const CommGroup& group);
int CommGroupRank(const CommGroup& group);
// Exposed and in-flight seconds of the group's collectives waited so far (see
// above). On NCCL, call after DeviceSynchronize: the timings of collectives
// whose events have not completed yet are read then.
double CommExposedSeconds(CommGroup& group);
double CommInFlightSeconds(CommGroup& group);
std::string CommBackendName(const CommGroup& group);  // "gloo" | "nccl"

// A collective issued and not yet waited for. Owns what the collective reads
// and writes until it ends; destroying one that is still pending waits for it,
// so no collective ever runs on freed memory. Move-only.
class PendingCollective {
 public:
  PendingCollective();
  explicit PendingCollective(std::unique_ptr<CommWork> work);
  PendingCollective(PendingCollective&& other) noexcept;
  PendingCollective& operator=(PendingCollective&& other) noexcept;
  ~PendingCollective();

  // Blocks until the collective has ended and its result is in place (the
  // slice copy of Gloo 1.13's reduce-scatter included); counts the group's
  // exposed and in-flight time. No-op when nothing is pending. Throws
  // c10::Error when the collective failed (a lost peer, a timeout).
  void Wait();
  bool pending() const;
  // Bytes this rank sends for the collective (the ring volumes above).
  int64_t bytes() const { return bytes_; }

 private:
  std::unique_ptr<CommWork> work_;
  int64_t bytes_ = 0;
};

// out (size·shard.numel(), contiguous) = concatenation of every rank's shard.
PendingCollective AllGatherFlatAsync(CommGroup& group, at::Tensor& out, const at::Tensor& shard);
// shard_out = this rank's 1/size slice of the element-wise SUM of every rank's
// `full` (full.numel() == size·shard_out.numel()). `full` may be overwritten.
PendingCollective ReduceScatterSumAsync(CommGroup& group, at::Tensor& shard_out, at::Tensor& full);
// In place: tensor = SUM over ranks.
PendingCollective AllReduceSumAsync(CommGroup& group, at::Tensor& tensor);
// The same, waited at once; each returns the bytes this rank sent.
int64_t AllGatherFlat(CommGroup& group, at::Tensor& out, const at::Tensor& shard);
int64_t ReduceScatterSum(CommGroup& group, at::Tensor& shard_out, at::Tensor& full);
int64_t AllReduceSum(CommGroup& group, at::Tensor& tensor);
// In place: tensor = rank `root`'s tensor.
int64_t Broadcast(CommGroup& group, at::Tensor& tensor, int root);
void Barrier(CommGroup& group);

}  // namespace compat
}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_TORCH_COMPAT_H_
