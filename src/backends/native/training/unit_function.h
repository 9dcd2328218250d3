#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_UNIT_FUNCTION_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_UNIT_FUNCTION_H_

// A unit of the model — the embedding, one decoder layer, or [final norm +
// lm_head] — run as ONE node of the autograd graph whose parameters exist in
// full only while the unit computes. Two users:
//
//   FSDP (fsdp_sharded.h)   the parameters are sharded at rest; Gather()
//                           all-gathers them, ReduceGradients() reduce-scatters
//                           their gradients into this rank's slice
//   activation checkpointing in one process (train.cc): the parameters are the
//                           model's own tensors; nothing is gathered
//
// y = unit_apply(compute, x, params, mode):
//
//   forward   tensors = params.Gather(kForward);  y = compute(x, tensors)
//             kRecompute  without an autograd graph; the gathered tensors are
//                         dropped at once (params.Release); kept: x only
//             kKeepGraph  with a graph inside the unit (its activations are
//                         kept); the gathered storage is freed (params.Free)
//                         while the graph keeps its views of it
//   backward  kRecompute  tensors = params.Gather(kBackward) again; y = compute(x, ·)
//                         again, now with a graph
//             kKeepGraph  params.Refill(): the same storage re-gathered
//             then autograd backward through the unit's graph from dL/dy:
//             dL/dx goes on to the previous unit; the gradients of leaves
//             accumulate in their .grad (the gathered tensors', and any other
//             leaf the compute used — LoRA adapters, say); then
//             params.ReduceGradients() turns the gathered tensors' gradients
//             into the gradients of params.Inputs() (FSDP: this rank's fp32
//             slice, which autograd accumulates over micro-batches) and
//             releases everything the unit gathered.
//
// Without grad mode (eval, inference) unit_apply just gathers (kForwardOnly),
// computes and releases. A unit whose input x does not require grad (the embedding's
// tokens, or every unit of a frozen base) still gets its backward: the node
// always has one gradient-requiring input.
//
// Kept in memory between a unit's forward and its backward:
//   kRecompute   x (the unit's input activation)
//   kKeepGraph   x, the unit's internal activations, and the gathered tensors'
//                shapes (not their data: FSDP frees the storage)

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <vector>

namespace protocol {
namespace native {

// The full parameters of one unit while it computes.
struct UnitTensors {
  std::vector<at::Tensor> params;  // in the order the compute function expects
  at::Tensor buffer;               // FSDP: the gathered flat buffer the params view; else undefined
};

// Why a unit's parameters are gathered: a forward whose backward follows
// (unit_apply in grad mode), a forward without one (eval, inference, save),
// or the backward (a recomputation). FSDP orders its prefetch by it
// (fsdp_schedule.h); whole parameters ignore it.
enum class UnitPass { kForward, kForwardOnly, kBackward };

// Where a unit's parameters come from and where their gradients go.
class UnitParameters {
 public:
  virtual ~UnitParameters() = default;
  // Autograd inputs of the unit's node standing for its parameters: FSDP's
  // fp32 slice (its gradient is the reduce-scattered slice); empty when the
  // parameters are ordinary leaves that get their own .grad.
  virtual std::vector<at::Tensor> Inputs() = 0;
  // The full parameters, as leaves that require grad when they are trained.
  virtual UnitTensors Gather(UnitPass pass) = 0;
  // kKeepGraph: releases the data of `t` but keeps the tensors (the graph's
  // saved views), and later fills them again. Only FSDP units support it (and
  // may keep the data instead: fsdp_schedule.h).
  virtual void Free(UnitTensors& t) = 0;
  virtual void Refill(UnitTensors& t) = 0;
  // After the unit's backward: one gradient per Inputs() entry (undefined
  // where there is none, or where the unit puts it in place itself once an
  // asynchronous reduction ends), built from the .grad of t.params; then t is
  // released.
  virtual std::vector<at::Tensor> ReduceGradients(UnitTensors& t) = 0;
};

// What a unit computes: y = compute(x, params).
using UnitCompute = std::function<at::Tensor(const at::Tensor& x, const std::vector<at::Tensor>& params)>;

enum class UnitMode {
  kRecompute,  // activation checkpointing: recompute the unit in backward
  kKeepGraph,  // keep the unit's activations (FSDP only: its gathered data is freed and re-gathered)
};

// See the top of this file. The autograd node keeps `compute` and `params`
// until its backward has run (or the graph is dropped).
at::Tensor unit_apply(UnitCompute compute, const at::Tensor& x, std::shared_ptr<UnitParameters> params, UnitMode mode);

// UnitParameters over tensors that are already whole (one process): Gather
// returns them, their gradients accumulate in their own .grad.
class LocalParameters : public UnitParameters {
 public:
  explicit LocalParameters(std::vector<at::Tensor> tensors) : tensors_(std::move(tensors)) {}
  std::vector<at::Tensor> Inputs() override { return {}; }
  UnitTensors Gather(UnitPass) override { return {tensors_, {}}; }
  void Free(UnitTensors&) override;    // not supported: throws
  void Refill(UnitTensors&) override;  // not supported: throws
  std::vector<at::Tensor> ReduceGradients(UnitTensors& t) override {
    t = {};
    return {};
  }

 private:
  std::vector<at::Tensor> tensors_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_UNIT_FUNCTION_H_
