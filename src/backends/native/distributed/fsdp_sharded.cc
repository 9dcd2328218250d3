#include "backends/native/distributed/fsdp_sharded.h"

#include <algorithm>
#include <cmath>
#include <c10/core/GradMode.h>

#include "backends/native/model/safetensors.h"
#include "backends/native/training/train.h"
#include "backends/native/training/unit_function.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {

// One FSDP unit: its parameters flattened and padded, this rank's float32
// slice of them, and the collectives that turn the slice into full tensors
// and full gradients back into a slice (when: fsdp_schedule.h).
class ShardedUnit : public ScheduledUnit {
 public:
  ShardedUnit(FsdpSchedule& schedule, std::string name, const FsdpSetup& setup, at::ScalarType dtype)
      : ScheduledUnit(schedule, std::move(name)), setup_(setup), dtype_(dtype) {}

  FlatUnit layout;  // entries, padded, shard (its `full` released once sliced)
  at::Tensor master;  // float32 (shard): a leaf whose .grad is the gradient slice
  std::vector<std::pair<int64_t, int64_t>> decay;  // [begin, end) of the slice holding matrix elements

  // The head: kept gathered from its forward to its backward. The embedding:
  // not gathered for its backward (the gradient of a lookup reads no weight).
  void SetRole(bool head, bool embedding) {
    reshard_after_forward_ = !head;
    backward_reads_params_ = !embedding;
  }

  std::vector<at::Tensor> Inputs() override { return {master}; }

 protected:
  InFlightGather IssueGather() override {
    return IssueUnitGather(setup_, at::empty({layout.padded}, master.options().dtype(dtype_)), Local());
  }

  UnitTensors Assemble(const at::Tensor& buffer) override {
    const bool trainable = at::GradMode::is_enabled();
    UnitTensors t;
    t.buffer = buffer;
    for (const at::Tensor& view : layout.Views(buffer)) {
      at::Tensor p = view.detach();
      if (trainable) p.requires_grad_(true);
      t.params.push_back(p);
    }
    return t;
  }

  // Into a fresh alias of the same storage: the graph's views keep their versions.
  InFlightGather IssueRefill(UnitTensors& resharded) override {
    return IssueUnitGather(setup_, compat::StorageRefill(resharded.buffer), Local());
  }

  void ReleaseStorage(UnitTensors& t) override { compat::StorageFree(t.buffer); }

  GradientReduction Reduction(UnitTensors& t) override {
    c10::NoGradGuard no_grad;
    // The gathered parameters are no longer read: their memory goes before the
    // flat gradient is allocated (the tensors, and their .grad, stay until copied).
    compat::StorageFree(t.buffer);
    // The unit's gradient, flattened like its parameters, in the reduce dtype;
    // padding stays zero.
    at::Tensor flat = at::zeros({layout.padded}, master.options().dtype(setup_.reduce_dtype));
    for (size_t i = 0; i < layout.entries.size(); ++i) {
      at::Tensor& g = t.params[i].mutable_grad();
      if (g.defined()) flat.narrow(0, layout.entries[i].offset, layout.entries[i].numel).copy_(g.reshape({-1}));
      g = at::Tensor();  // freed as soon as it is copied
    }
    t = UnitTensors{};  // the gathered parameters and their gradients go now
    at::Tensor slice = at::empty({layout.shard}, flat.options());
    GradientReduction r;
    r.stages.push_back({"reduce-scatter",
                        [this, slice, flat]() mutable { return setup_.shard->ReduceScatterSumAsync(slice, flat); },
                        [this, slice] { Accumulate(slice); }});
    if (setup_.replica && schedule().gradient_sync()) {
      // The step's whole gradient slice (micro-batches accumulated) over the replicas.
      auto reduced = std::make_shared<at::Tensor>();
      r.stages.push_back({"all-reduce across replicas",
                          [this, reduced]() {
                            at::Tensor& g = master.mutable_grad();
                            *reduced = g.scalar_type() == setup_.reduce_dtype ? g : g.to(setup_.reduce_dtype);
                            return setup_.replica->AllReduceSumAsync(*reduced);
                          },
                          [this, reduced] {
                            if (!reduced->is_same(master.grad())) master.mutable_grad().copy_(*reduced);
                            *reduced = at::Tensor();
                          }});
    }
    return r;
  }

 private:
  // This rank's slice as it is gathered: the master weights in the compute dtype.
  at::Tensor Local() const { return master.detach().to(dtype_); }

  // master.grad += slice (float32), the slice's first arrival setting it.
  void Accumulate(const at::Tensor& slice) {
    c10::NoGradGuard no_grad;
    at::Tensor& g = master.mutable_grad();
    if (!g.defined()) g = slice.scalar_type() == at::kFloat ? slice : slice.to(at::kFloat);
    else g.add_(slice);
  }

  const FsdpSetup& setup_;
  at::ScalarType dtype_;  // the compute dtype the unit is gathered in
};

InFlightGather IssueUnitGather(const FsdpSetup& setup, at::Tensor buffer, const at::Tensor& shard) {
  c10::NoGradGuard no_grad;
  InFlightGather g;
  g.buffer = std::move(buffer);
  g.collective = setup.shard->AllGatherAsync(g.buffer, shard);
  return g;
}

std::vector<at::Tensor> FlatUnit::Views(const at::Tensor& buffer) const {
  std::vector<at::Tensor> out;
  for (const Entry& e : entries) out.push_back(buffer.narrow(0, e.offset, e.numel).view(e.shape));
  return out;
}

Result<FlatUnit> unit_flatten_filled(const std::vector<NamedParameter>& params, int world, const UnitFill& fill) {
  c10::NoGradGuard no_grad;
  for (const NamedParameter& p : params) *p.tensor = at::empty(p.shape, at::kFloat);
  if (Status s = fill(params); !s.ok()) return s;
  FlatUnit u;
  std::vector<at::Tensor> flat;
  for (const NamedParameter& p : params) {
    u.entries.push_back({p.name, p.shape, u.numel, p.tensor->numel()});
    u.numel += p.tensor->numel();
    flat.push_back(p.tensor->reshape({-1}));
  }
  u.shard = (u.numel + world - 1) / world;
  u.padded = u.shard * world;
  if (u.padded > u.numel) flat.push_back(at::zeros({u.padded - u.numel}, at::kFloat));
  u.full = at::cat(flat);
  flat.clear();
  for (const NamedParameter& p : params) *p.tensor = at::Tensor();
  return u;
}

namespace {

LayerWeights LayerFrom(const std::vector<at::Tensor>& p) {
  LayerWeights w;
  std::vector<at::Tensor*> fields = layer_parameters(w);
  for (size_t i = 0; i < fields.size(); ++i) *fields[i] = p[i];
  return w;
}

}  // namespace

Result<std::unique_ptr<ShardedParams>> ShardedParams::Create(const ModelConfig& config, at::ScalarType dtype,
                                                             const at::Device& device, const FsdpSetup& setup,
                                                             const TrainOptions& options, const Fill& fill) {
  std::unique_ptr<ShardedParams> sp(new ShardedParams(setup.prefetch));
  sp->model_ = model_create_unallocated(config, device);
  sp->dtype_ = dtype;
  sp->setup_ = setup;
  sp->options_ = options;
  const int64_t W = setup.shard->size(), rank = setup.shard->rank();

  // Units in model_parameters order: [embed], [layer 0], ..., [norm, lm_head].
  std::vector<NamedParameter> all = model_parameters(sp->model_);
  const size_t per_layer = layer_parameters(sp->model_.layers[0]).size();
  std::vector<std::vector<NamedParameter>> units = {{all[0]}};
  for (size_t l = 0; l < sp->model_.layers.size(); ++l)
    units.emplace_back(all.begin() + static_cast<std::ptrdiff_t>(1 + l * per_layer),
                       all.begin() + static_cast<std::ptrdiff_t>(1 + (l + 1) * per_layer));
  units.emplace_back(all.end() - 2, all.end());

  c10::NoGradGuard no_grad;
  for (size_t i = 0; i < units.size(); ++i) {
    const bool head = i + 1 == units.size(), embedding = i == 0;
    const std::string name = embedding ? "embedding" : head ? "head" : fmt::format("layer {}", i - 1);
    auto u = std::make_shared<ShardedUnit>(sp->schedule_, name, sp->setup_, dtype);
    u->SetRole(head, embedding);
    // The unit in full, float32 on the CPU, only while it is filled and sliced.
    auto flat = unit_flatten_filled(units[i], static_cast<int>(W), fill);
    if (!flat.ok()) return flat.status();
    u->layout = std::move(*flat);
    const int64_t S = u->layout.shard, begin = rank * S, end = begin + S;
    u->master = u->layout.full.narrow(0, begin, S).to(device, /*non_blocking=*/false, /*copy=*/true);
    u->layout.full = at::Tensor();
    u->master.requires_grad_(true);
    for (const FlatUnit::Entry& e : u->layout.entries) {
      if (e.shape.size() < 2) continue;  // RMSNorm gains are not decayed
      const int64_t b = std::max(begin, e.offset), f = std::min(end, e.offset + e.numel);
      if (f <= b) continue;
      if (!u->decay.empty() && u->decay.back().second == b - begin) u->decay.back().second = f - begin;  // adjacent
      else u->decay.push_back({b - begin, f - begin});
    }
    sp->schedule_.Add(*u);
    sp->masters_.push_back(u->master);
    sp->m_.push_back(at::zeros({S}, u->master.options()));
    sp->v_.push_back(at::zeros({S}, u->master.options()));
    sp->units_.push_back(std::move(u));
  }
  return sp;
}

ShardedParams::~ShardedParams() = default;

int64_t ShardedParams::shard_elements() const {
  int64_t n = 0;
  for (const auto& u : units_) n += u->layout.shard;
  return n;
}

at::Tensor ShardedParams::Forward(const at::Tensor& tokens) {
  schedule_.BeginForward();
  const Model& m = model_;
  const RopeRows rope = rope_rows(m, 0, tokens.size(1), dtype_);
  auto embed = [](const at::Tensor& t, const std::vector<at::Tensor>& p) { return embed_forward(p[0], t); };
  at::Tensor x = unit_apply(embed, tokens, units_.front(), UnitMode::kKeepGraph);
  for (size_t l = 0; l < m.layers.size(); ++l) {
    auto layer = [&m, l, rope](const at::Tensor& h, const std::vector<at::Tensor>& p) {
      return decoder_layer_forward(m, l, LayerFrom(p), h, rope, nullptr, 0);
    };
    const UnitMode mode = layer_checkpointed(static_cast<int64_t>(l), options_.checkpoint_every) ? UnitMode::kRecompute
                                                                                                  : UnitMode::kKeepGraph;
    x = unit_apply(layer, x, units_[1 + l], mode);
  }
  auto head = [&m](const at::Tensor& h, const std::vector<at::Tensor>& p) { return head_forward(m, p[0], p[1], h); };
  return unit_apply(head, x, units_.back(), UnitMode::kKeepGraph);
}

at::Tensor ShardedParams::Step(double lr) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& u : units_)
    grads.push_back(u->master.grad().defined() ? u->master.grad() : at::zeros_like(u->master));
  // Global norm: Σ over ranks of each slice's squared norm (padding is zero),
  // as train.h's clip_gradients takes it (gradient_square_sum), summed over
  // the ranks in float64; clipped as clip_gradients clips, on the device:
  // nothing is read back here.
  at::Tensor sum_sq = gradient_square_sum(grads).view({1});
  setup_.shard->AllReduceSum(sum_sq);
  const at::Tensor norm = sum_sq.sqrt().squeeze(0);
  scale_to_max_norm(grads, norm, options_.grad_clip);
  // AdamW, exactly as train.h's, on each unit's slice: one flat buffer a unit,
  // weight decay on its matrix elements (one or two ranges a unit).
  ++t_;
  if (!units_.empty() && adamw_fused(options_, units_[0]->master.device())) {
    // One pass a unit: its decayed ranges with weight decay, the rest without
    // (train.h fused_adamw_step).
    AdamWRun decay, kept;
    for (size_t i = 0; i < units_.size(); ++i) {
      const at::Tensor theta = units_[i]->master.detach();
      int64_t done = 0;
      auto add = [&](AdamWRun& into, int64_t begin, int64_t end) {
        if (end <= begin) return;
        auto range = [&](const at::Tensor& whole) { return whole.narrow(0, begin, end - begin); };
        into.Add(range(theta), range(grads[i]), range(m_[i]), range(v_[i]));
      };
      for (const auto& [begin, end] : units_[i]->decay) {
        add(kept, done, begin);
        add(options_.weight_decay > 0 ? decay : kept, begin, end);
        done = end;
      }
      add(kept, done, theta.numel());
    }
    fused_adamw_step(decay, kept, options_, lr, t_);
    for (const auto& u : units_) u->master.mutable_grad() = at::Tensor();  // freed until the next backward
    return norm;
  }
  const double b1 = options_.beta1, b2 = options_.beta2;
  const double bias1 = 1.0 - std::pow(b1, static_cast<double>(t_));
  const double bias2 = 1.0 - std::pow(b2, static_cast<double>(t_));
  for (size_t i = 0; i < units_.size(); ++i) {
    at::Tensor theta = units_[i]->master.detach();
    const at::Tensor& g = grads[i];
    m_[i].mul_(b1).add_(g, 1.0 - b1);
    v_[i].mul_(b2).addcmul_(g, g, 1.0 - b2);
    if (options_.weight_decay > 0)
      for (const auto& [begin, end] : units_[i]->decay) theta.narrow(0, begin, end - begin).mul_(1.0 - lr * options_.weight_decay);
    at::Tensor denom = (v_[i] / bias2).sqrt_().add_(options_.eps);
    theta.addcdiv_(m_[i], denom, -lr / bias1);
    units_[i]->master.mutable_grad() = at::Tensor();  // the gradient slice is freed until the next backward
  }
  return norm;
}

Status ShardedParams::Save(const std::string& dir, bool write) {
  Status status = Status::Ok();
  std::unique_ptr<SafetensorsWriter> writer;
  if (write) {
    std::vector<SafetensorsWriter::Entry> entries;
    for (const auto& u : units_)
      for (const FlatUnit::Entry& e : u->layout.entries) entries.push_back({e.name, dtype_, e.shape});
    auto path = model_save_begin(model_.config, dir);
    if (!path.ok()) status = path.status();
    if (status.ok()) {
      auto created = SafetensorsWriter::Create(*path, entries);
      if (created.ok()) writer = std::move(*created);
      else status = created.status();
    }
  }
  // Every rank gathers every unit (collectives), also after a writer error.
  c10::NoGradGuard no_grad;
  schedule_.BeginForward();
  for (const auto& u : units_) {
    UnitTensors t = u->Gather(UnitPass::kForwardOnly);
    if (writer && status.ok())
      for (const at::Tensor& p : t.params)
        if (status.ok()) status = writer->Write(p);
  }
  if (writer && status.ok()) status = writer->Close();
  return status;
}

}  // namespace native
}  // namespace protocol
