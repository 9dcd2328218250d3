// Loading a 4-bit model one tensor at a time (model_fill_nf4 in
// quantized_model.h; the case's fill, case_weights.h): the same codes and
// scales as the whole model loaded in full precision and then quantized
// (model_quantize_nf4), from a seeded random start and from a safetensors
// file, and never more than one projection in full precision on the way.
#include "native_test_support.h"

#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "backends/native/case/case_weights.h"
#include "backends/native/model/model.h"
#include "backends/native/model/safetensors.h"
#include "backends/native/quant/quantized_model.h"
#include "test_files.h"

namespace protocol {
namespace native {
namespace {

using testing::TempDir;

// 2 layers, C 24, 4 query heads of 6 sharing 2 kv heads, F 40: k and v
// (12·24 = 288 weights) and o end inside a block of 64, so the padded
// last block is covered too.
ModelConfig OddConfig() {
  ModelConfig c = testing::TinyTestConfig(30, 2);
  c.dim = 24;
  c.hidden_dim = 40;
  return c;
}

// Every tensor of the two 4-bit models is equal: the full-precision ones and
// every part of every NF4 projection (codes, scales, double-quant constants).
void CheckSameWeights(Model& a, Model& b) {
  std::vector<NamedParameter> pa = model_parameters(a), pb = model_parameters(b);
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    CAPTURE(pa[i].name);
    REQUIRE(pa[i].tensor->defined() == pb[i].tensor->defined());
    if (pa[i].tensor->defined()) {
      CHECK((pa[i].tensor->scalar_type() == pb[i].tensor->scalar_type()));
      CHECK(at::equal(*pa[i].tensor, *pb[i].tensor));
    }
  }
  const Nf4Projections* qa = model_nf4(a);
  const Nf4Projections* qb = model_nf4(b);
  REQUIRE(qa != nullptr);
  REQUIRE(qb != nullptr);
  REQUIRE(qa->layers.size() == qb->layers.size());
  for (size_t l = 0; l < qa->layers.size(); ++l)
    for (size_t p = 0; p < qa->layers[l].size(); ++p) {
      CAPTURE(l);
      CAPTURE(p);
      const Nf4Tensor& x = qa->layers[l][p];
      const Nf4Tensor& y = qb->layers[l][p];
      CHECK(x.shape == y.shape);
      CHECK(x.numel == y.numel);
      CHECK(at::equal(x.packed, y.packed));
      for (auto part : {&Nf4Tensor::absmax, &Nf4Tensor::absmax_codes, &Nf4Tensor::absmax_scales,
                        &Nf4Tensor::absmax_mean}) {
        REQUIRE((x.*part).defined() == (y.*part).defined());
        if ((x.*part).defined()) CHECK(at::equal(x.*part, y.*part));
      }
    }
}

}  // namespace

TEST_CASE("quantized load: one tensor at a time gives model_quantize_nf4's codes and scales (random start, file)") {
  const ModelConfig config = OddConfig();
  REQUIRE(config.Validate().empty());
  TempDir dir("quantized-load");
  REQUIRE_FALSE(dir.path.empty());
  {
    // The file: seeded weights in bf16, as a published checkpoint holds them.
    Model saved = model_create(config, at::TensorOptions().dtype(at::kBFloat16));
    model_init_random(saved, 11);
    REQUIRE(model_save(saved, dir.str()).ok());
  }
  for (WeightsSource source : {WeightsSource::kRandomDeclared, WeightsSource::kPath}) {
    for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
      for (bool dq : {false, true}) {
        CAPTURE(static_cast<int>(source));
        CAPTURE(dtype);
        CAPTURE(dq);
        CaseWeights weights;
        weights.source = source;
        // Today's load: the whole model in the compute dtype, then quantized.
        Model whole = model_create(config, at::TensorOptions().dtype(dtype));
        REQUIRE(LoadOrInitWeights(whole, weights, dir.str(), 5).ok());
        model_quantize_nf4(whole, dq);
        // One tensor at a time.
        Model one = model_create(config, at::TensorOptions().dtype(dtype), ProjectionTensors::kLeaveUndefined);
        REQUIRE(LoadOrInitNf4Weights(one, weights, dir.str(), 5, dq).ok());
        CheckSameWeights(whole, one);
        CHECK(nf4_weight_bytes(one) == nf4_weight_bytes(whole));
      }
    }
  }
}

TEST_CASE("quantized load: the fill sees one tensor per call, each projection a transient freed before the next") {
  const ModelConfig config = OddConfig();
  Model m = model_create(config, at::TensorOptions().dtype(at::kFloat), ProjectionTensors::kLeaveUndefined);
  // The model's own projection fields: never allocated on the way.
  std::set<const at::Tensor*> fields;
  for (LayerWeights& w : m.layers)
    for (int k = 0; k < kProjectionCount; ++k) fields.insert(&layer_projection(w, static_cast<Projection>(k)));
  CHECK(model_parameter_count(m) == 2 * 30 * 24 + 24 + 2 * 2 * 24);  // embedding, lm_head, the norms
  std::vector<std::string> order;
  int transients = 0;
  auto fill = [&](const std::vector<NamedParameter>& run) -> Status {
    REQUIRE(run.size() == 1);
    const NamedParameter& p = run[0];
    order.push_back(p.name);
    REQUIRE(p.tensor->defined());
    CHECK(p.tensor->sizes().vec() == p.shape);
    CHECK((p.tensor->scalar_type() == at::kFloat));
    if (fields.count(p.tensor) == 0 && p.shape.size() == 2 && p.name.find(".layers.") != std::string::npos) {
      ++transients;
      // Only this transient holds the projection's weights: no model field is allocated.
      for (const at::Tensor* f : fields) CHECK_FALSE(f->defined());
    }
    p.tensor->fill_(0.01f);
    return Status::Ok();
  };
  REQUIRE(model_fill_nf4(m, fill).ok());
  std::vector<std::string> names;
  for (const NamedParameter& p : model_parameters(m)) names.push_back(p.name);
  CHECK(order == names);  // model_parameters order, every tensor once
  CHECK(transients == 2 * kProjectionCount);
  for (const at::Tensor* f : fields) CHECK_FALSE(f->defined());
  REQUIRE(model_nf4(m) != nullptr);
  CHECK(nf4_weight_bytes(m) > 0);
}

TEST_CASE("quantized load: the fill's error stops the load; the model is not 4-bit") {
  const ModelConfig config = OddConfig();
  TempDir dir("quantized-load-error");
  REQUIRE_FALSE(dir.path.empty());
  // A file without the last layer's down projection.
  Model saved = model_create(config, at::TensorOptions().dtype(at::kFloat));
  model_init_random(saved, 3);
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const NamedParameter& p : model_parameters(saved))
    if (p.name != "model.layers.1.mlp.down_proj.weight") tensors.push_back({p.name, *p.tensor});
  std::filesystem::create_directories(dir.path);
  REQUIRE(safetensors_save((dir.path / "model.safetensors").string(), tensors).ok());
  CaseWeights weights;
  weights.source = WeightsSource::kPath;
  Model m = model_create(config, at::TensorOptions().dtype(at::kFloat), ProjectionTensors::kLeaveUndefined);
  Status s = LoadOrInitNf4Weights(m, weights, dir.str(), 1, false);
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("model.layers.1.mlp.down_proj.weight") != std::string::npos);
  CHECK(model_nf4(m) == nullptr);
  // No weights at all: the reader's error, before anything is read.
  TempDir empty("quantized-load-empty");
  Model n = model_create(config, at::TensorOptions().dtype(at::kFloat), ProjectionTensors::kLeaveUndefined);
  CHECK_FALSE(LoadOrInitNf4Weights(n, weights, empty.str(), 1, false).ok());
}

}  // namespace native
}  // namespace protocol
