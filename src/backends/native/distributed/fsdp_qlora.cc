#include "backends/native/distributed/fsdp_qlora.h"

#include <algorithm>
#include <array>
#include <c10/core/GradMode.h>

#include "backends/native/quant/quantized_model.h"
#include "backends/native/training/unit_function.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

// A frozen unit of full-precision weights (the embedding; [norm, lm_head]):
// this rank's slice of the unit's flat weights in the compute dtype, padded
// to a multiple of W, gathered for use and freed after (the head stays
// gathered from its forward to its backward, fsdp_schedule.h).
class FrozenSlicedUnit : public ScheduledUnit {
 public:
  FrozenSlicedUnit(FsdpSchedule& schedule, std::string name, const FsdpSetup& setup, bool head)
      : ScheduledUnit(schedule, std::move(name)), setup_(setup) {
    reshard_after_forward_ = !head;
  }

  FlatUnit layout;   // entries, padded, shard (its `full` released once sliced)
  at::Tensor slice;  // layout.shard elements of the compute dtype

  std::vector<at::Tensor> Inputs() override { return {}; }

 protected:
  InFlightGather IssueGather() override {
    return IssueUnitGather(setup_, at::empty({layout.padded}, slice.options()), slice);
  }
  UnitTensors Assemble(const at::Tensor& buffer) override {
    UnitTensors t;
    t.buffer = buffer;
    t.params = layout.Views(buffer);
    return t;
  }
  InFlightGather IssueRefill(UnitTensors& resharded) override {
    return IssueUnitGather(setup_, compat::StorageRefill(resharded.buffer), slice);
  }
  void ReleaseStorage(UnitTensors& t) override { compat::StorageFree(t.buffer); }
  GradientReduction Reduction(UnitTensors&) override { return {}; }

 private:
  const FsdpSetup& setup_;
};

namespace {

// The tensors of one NF4 projection, in a fixed order (what Gather lists).
std::vector<at::Tensor> Nf4Parts(const Nf4Tensor& q) {
  if (q.double_quant()) return {q.packed, q.absmax_codes, q.absmax_scales, q.absmax_mean};
  return {q.packed, q.absmax};
}

size_t Nf4PartCount(bool double_quant) { return double_quant ? 4 : 2; }

// The seven projections from Gather's list (after the two norms).
std::array<Nf4Tensor, kProjectionCount> Nf4From(const std::vector<at::Tensor>& p, const Nf4UnitLayout& layout) {
  std::array<Nf4Tensor, kProjectionCount> out;
  const size_t n = Nf4PartCount(layout.double_quant);
  for (size_t i = 0; i < kProjectionCount; ++i) {
    Nf4Tensor& q = out[i];
    const size_t at = 2 + i * n;
    q.packed = p[at];
    if (layout.double_quant) {
      q.absmax_codes = p[at + 1];
      q.absmax_scales = p[at + 2];
      q.absmax_mean = p[at + 3];
    } else {
      q.absmax = p[at + 1];
    }
    q.shape = layout.shapes[i];
    q.numel = 1;
    for (int64_t d : q.shape) q.numel *= d;
  }
  return out;
}

}  // namespace

// A frozen 4-bit decoder layer: this rank's shard of the layer's NF4 bytes
// (uint8) and the two RMSNorm gains (replicated). Assemble lists
// [input_norm, post_norm, then each projection's Nf4Parts], every NF4 part a
// view of the gathered buffer (nf4_unit_unflatten: no copy), which is
// released and refilled in place as one storage, like a FrozenSlicedUnit's.
// Its gradient reduction is that of the layer's LoRA adapters (replicated on
// every rank), on the last micro-batch of a step.
class Nf4LayerUnit : public ScheduledUnit {
 public:
  Nf4LayerUnit(FsdpSchedule& schedule, std::string name, const FsdpSetup& setup)
      : ScheduledUnit(schedule, std::move(name)), setup_(setup) {}

  Nf4UnitLayout layout;
  at::Tensor shard;  // uint8, nf4_shard_bytes(layout, W)
  at::Tensor input_norm, post_norm;
  std::vector<at::Tensor> trainable;  // the layer's adapters the optimizer updates

  std::vector<at::Tensor> Inputs() override { return {}; }

  // The layer's seven projections, from the all-gathered shards (each part a
  // view of the gathered buffer, which they keep alive).
  std::vector<Nf4Tensor> GatherNf4() {
    InFlightGather g = IssueGather();
    g.collective.Wait();
    return Unflatten(g.buffer);
  }

 protected:
  InFlightGather IssueGather() override {
    return IssueUnitGather(setup_, at::empty({setup_.shard->size() * shard.numel()}, shard.options()), shard);
  }
  UnitTensors Assemble(const at::Tensor& buffer) override {
    UnitTensors t;
    t.buffer = buffer;
    t.params = {input_norm, post_norm};
    for (const Nf4Tensor& q : Unflatten(buffer))
      for (const at::Tensor& part : Nf4Parts(q)) t.params.push_back(part);
    return t;
  }
  // Into the same storage: the views autograd saved read the refilled bytes.
  InFlightGather IssueRefill(UnitTensors& resharded) override {
    return IssueUnitGather(setup_, compat::StorageRefill(resharded.buffer), shard);
  }
  void ReleaseStorage(UnitTensors& t) override { compat::StorageFree(t.buffer); }
  GradientReduction Reduction(UnitTensors&) override;

 private:
  std::vector<Nf4Tensor> Unflatten(const at::Tensor& gathered) {
    c10::NoGradGuard no_grad;
    auto unit = nf4_unit_unflatten(gathered, layout);
    if (!unit.ok()) throw std::runtime_error(unit.status().message());  // a layout bug, not input
    return std::move(*unit);
  }

  const FsdpSetup& setup_;
};

// The layer's adapter gradients summed over the group's ranks, so that every
// rank takes the same AdamW step: one flat buffer in the reduce dtype,
// all-reduced over the group (full sharding); with hybrid sharding over R > 1
// nodes, reduce-scattered within the node, the slice all-reduced across the
// replicas and all-gathered back, so that only slices cross between nodes.
GradientReduction Nf4LayerUnit::Reduction(UnitTensors&) {
  GradientReduction r;
  if (trainable.empty() || !schedule().gradient_sync()) return r;
  c10::NoGradGuard no_grad;
  const at::ScalarType dtype = setup_.reduce_dtype;
  std::vector<at::Tensor> parts;
  for (const at::Tensor& t : trainable)
    parts.push_back(t.grad().defined() ? t.grad().reshape({-1}).to(dtype) : at::zeros({t.numel()}, t.options().dtype(dtype)));
  const int64_t n = [&] {
    int64_t total = 0;
    for (const at::Tensor& t : trainable) total += t.numel();
    return total;
  }();
  auto copy_back = [list = trainable](const at::Tensor& flat) {
    int64_t offset = 0;
    for (const at::Tensor& t : list) {
      at::Tensor g = flat.narrow(0, offset, t.numel()).view(t.sizes()).to(t.scalar_type());
      offset += t.numel();
      if (t.grad().defined()) t.mutable_grad().copy_(g);
      else const_cast<at::Tensor&>(t).mutable_grad() = g.clone();
    }
  };
  if (!setup_.replica) {
    at::Tensor flat = at::cat(parts);
    r.stages.push_back({"adapter all-reduce", [this, flat]() mutable { return setup_.shard->AllReduceSumAsync(flat); },
                        [flat, copy_back] { copy_back(flat); }});
    return r;
  }
  const int64_t S = setup_.shard->size(), padded = (n + S - 1) / S * S;
  if (padded > n) parts.push_back(at::zeros({padded - n}, parts[0].options()));
  at::Tensor flat = at::cat(parts), slice = at::empty({padded / S}, flat.options());
  r.stages.push_back({"adapter reduce-scatter",
                      [this, slice, flat]() mutable { return setup_.shard->ReduceScatterSumAsync(slice, flat); }, {}});
  r.stages.push_back({"adapter all-reduce across replicas",
                      [this, slice]() mutable { return setup_.replica->AllReduceSumAsync(slice); }, {}});
  r.stages.push_back({"adapter all-gather",
                      [this, slice, flat]() mutable { return setup_.shard->AllGatherAsync(flat, slice); },
                      [flat, copy_back] { copy_back(flat); }});
  return r;
}

Result<std::unique_ptr<ShardedQlora>> ShardedQlora::Create(const ModelConfig& config, at::ScalarType dtype,
                                                           const at::Device& device, const FsdpSetup& setup,
                                                           const TrainOptions& options, bool double_quant,
                                                           std::shared_ptr<const LoraAdapters> lora, const Fill& fill) {
  std::unique_ptr<ShardedQlora> sq(new ShardedQlora(setup.prefetch));
  sq->model_ = model_create_unallocated(config, device);
  sq->projections_ = std::make_shared<Nf4Projections>();
  sq->projections_->layers.resize(static_cast<size_t>(config.n_layers));
  sq->projections_->lora = std::move(lora);
  sq->model_.projections = sq->projections_;
  sq->dtype_ = dtype;
  sq->setup_ = setup;
  sq->options_ = options;
  sq->layout_ = nf4_layer_layout(config, double_quant);
  const int W = setup.shard->size(), group_rank = setup.shard->rank();

  std::vector<NamedParameter> all = model_parameters(sq->model_);
  const size_t per_layer = layer_parameters(sq->model_.layers[0]).size();
  c10::NoGradGuard no_grad;
  // A frozen full-precision unit: filled in float32 on the CPU, converted to
  // the compute dtype, this rank's slice kept on the device.
  auto frozen = [&](const std::vector<NamedParameter>& params, const char* name,
                    bool head) -> Result<std::shared_ptr<FrozenSlicedUnit>> {
    auto flat = unit_flatten_filled(params, W, fill);
    if (!flat.ok()) return flat.status();
    auto u = std::make_shared<FrozenSlicedUnit>(sq->schedule_, name, sq->setup_, head);
    sq->schedule_.Add(*u);
    u->layout = std::move(*flat);
    const int64_t S = u->layout.shard;
    u->slice = u->layout.full.narrow(0, group_rank * S, S).to(device, dtype, /*non_blocking=*/false, /*copy=*/true);
    u->layout.full = at::Tensor();
    return u;
  };

  auto embed = frozen({all[0]}, "embedding", false);
  if (!embed.ok()) return embed.status();
  sq->embed_ = *embed;
  for (size_t l = 0; l < sq->model_.layers.size(); ++l) {
    std::vector<NamedParameter> params(all.begin() + static_cast<std::ptrdiff_t>(1 + l * per_layer),
                                       all.begin() + static_cast<std::ptrdiff_t>(1 + (l + 1) * per_layer));
    auto u = std::make_shared<Nf4LayerUnit>(sq->schedule_, fmt::format("layer {}", l), sq->setup_);
    sq->schedule_.Add(*u);
    u->layout = sq->layout_;
    LayerWeights& w = sq->model_.layers[l];
    // One tensor at a time, in order: a projection is quantized from the
    // compute dtype on the device, as model_quantize_nf4 quantizes a model
    // loaded in that dtype, and its full-precision copies are freed before
    // the next is filled.
    std::vector<Nf4Tensor> q(static_cast<size_t>(kProjectionCount));
    for (NamedParameter& p : params) {
      *p.tensor = at::empty(p.shape, at::kFloat);
      if (Status s = fill({p}); !s.ok()) return s;
      for (int k = 0; k < kProjectionCount; ++k) {
        if (p.tensor != &layer_projection(w, static_cast<Projection>(k))) continue;
        q[static_cast<size_t>(k)] = nf4_quantize(p.tensor->to(device, dtype), double_quant);
        *p.tensor = at::Tensor();
      }
    }
    u->input_norm = w.input_norm.to(device, dtype, false, true);
    u->post_norm = w.post_norm.to(device, dtype, false, true);
    w.input_norm = at::Tensor();
    w.post_norm = at::Tensor();
    auto flat = nf4_unit_flatten(q, u->layout);
    if (!flat.ok()) return flat.status();
    q.clear();
    auto shard = nf4_unit_shard(*flat, u->layout, group_rank, W);
    if (!shard.ok()) return shard.status();
    u->shard = *shard;
    sq->layers_.push_back(std::move(u));
  }
  auto head = frozen({all[all.size() - 2], all[all.size() - 1]}, "head", true);
  if (!head.ok()) return head.status();
  sq->head_ = *head;
  return sq;
}

ShardedQlora::~ShardedQlora() = default;

at::Tensor ShardedQlora::Forward(const at::Tensor& tokens) {
  schedule_.BeginForward();
  const Model& m = model_;
  const RopeRows rope = rope_rows(m, 0, tokens.size(1), dtype_);
  at::Tensor x;
  {
    c10::NoGradGuard no_grad;  // nothing before the first layer trains: no graph, no backward gather
    UnitTensors t = embed_->Gather(UnitPass::kForwardOnly);
    x = embed_forward(t.params[0], tokens);
  }
  for (size_t l = 0; l < m.layers.size(); ++l) {
    Nf4Projections* projections = projections_.get();
    const Nf4UnitLayout* layout = &layout_;
    auto layer = [&m, l, rope, projections, layout](const at::Tensor& h, const std::vector<at::Tensor>& p) {
      LayerWeights w;
      w.input_norm = p[0];
      w.post_norm = p[1];
      // The override reads layer l's projections while the layer computes;
      // nf4_linear keeps what its backward needs, so the slot is cleared after.
      projections->layers[l] = Nf4From(p, *layout);
      at::Tensor y = decoder_layer_forward(m, l, w, h, rope, nullptr, 0);
      projections->layers[l] = {};
      return y;
    };
    const UnitMode mode = layer_checkpointed(static_cast<int64_t>(l), options_.checkpoint_every) ? UnitMode::kRecompute
                                                                                                  : UnitMode::kKeepGraph;
    x = unit_apply(layer, x, layers_[l], mode);
  }
  auto head = [&m](const at::Tensor& h, const std::vector<at::Tensor>& p) { return head_forward(m, p[0], p[1], h); };
  return unit_apply(head, x, head_, UnitMode::kKeepGraph);
}

void ShardedQlora::SetTrainable(const std::vector<at::Tensor>& trainable) {
  const LoraAdapters* lora = projections_->lora.get();
  for (size_t l = 0; l < layers_.size(); ++l) {
    std::vector<at::Tensor>& mine = layers_[l]->trainable;
    mine.clear();
    if (!lora || l >= lora->layers.size()) continue;
    for (const at::Tensor& t : trainable)
      for (const LoraAdapter& a : lora->layers[l])
        if (t.is_same(a.a) || t.is_same(a.b)) mine.push_back(t);
  }
}

void ShardedQlora::UseAdapters(std::shared_ptr<const LoraAdapters> lora) { projections_->lora = std::move(lora); }

std::vector<std::vector<Nf4Tensor>> ShardedQlora::GatherLayers() {
  std::vector<std::vector<Nf4Tensor>> out;
  for (const auto& u : layers_) out.push_back(u->GatherNf4());
  return out;
}

int64_t ShardedQlora::base_bytes() const {
  int64_t n = embed_->slice.nbytes() + head_->slice.nbytes();
  for (const auto& u : layers_) n += u->shard.nbytes() + u->input_norm.nbytes() + u->post_norm.nbytes();
  return static_cast<int64_t>(n);
}

int64_t ShardedQlora::layer_shard_bytes() const { return layers_.empty() ? 0 : layers_[0]->shard.numel(); }

}  // namespace native
}  // namespace protocol
