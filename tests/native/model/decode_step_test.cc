// A decode step whose position lives on the device (model.h:
// model_decode_step; generate.h: DecodeStep): model_forward's logits at each
// position and its cache; generation token for token equal to the host
// position's, with the same reads; no host read and no shape that changes
// inside a step (what a CUDA graph needs); what is refused.
#include "native_test_support.h"

#include <c10/core/GradMode.h>

#include <doctest/doctest.h>

#include <string>

#include "backends/native/model/generate.h"
#include "backends/native/model/model.h"
#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

Model TestModel(at::ScalarType dtype, uint64_t seed = 7) {
  Model m = model_create(testing::TinyTestConfig(), at::TensorOptions().dtype(dtype));
  model_init_random(m, seed);
  return m;
}

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  const at::Tensor g = got.to(at::kDouble), w = want.to(at::kDouble);
  return ((g - w).norm() / w.norm()).item<double>();
}

const at::Tensor kPrompt = at::tensor(std::vector<int64_t>{1, 7, 3}, at::kLong).view({1, 3});

TEST_CASE("decode step: the position on the device gives model_forward's logits and cache at each position") {
  // float32 on the CPU: the fused ops at the position on the device, the host position's kernels: the
  // same bits. float64: no fused ops; the composite step attends over the whole cache, masked (its
  // softmax in float32 on libtorch 1.13: within 1e-6).
  for (at::ScalarType dtype : {at::kFloat, at::kDouble}) {
    CAPTURE(std::string(c10::toString(dtype)));
    const Model m = TestModel(dtype);
    c10::InferenceMode inference;
    const bool fused_ops = dtype == at::kFloat;
    KvCache host = kv_cache_create(m, 1, 16), device = kv_cache_create(m, 1, 16);
    (void)model_forward(m, kPrompt, &host);
    (void)model_forward(m, kPrompt, &device);
    at::Tensor pos = at::full({1}, 3, at::kLong);
    for (int64_t token : {5, 11, 2, 40, 9, 9, 31}) {
      CAPTURE(token);
      const at::Tensor input = at::full({1, 1}, token, at::kLong);
      const at::Tensor want = model_forward(m, input, &host);
      compat::OpCounter counter;
      const at::Tensor got = model_decode_step(m, input, pos, device);
      CHECK((counter.Describe().find("protocol::decode_attention_at") != std::string::npos) == fused_ops);
      REQUIRE(got.sizes() == want.sizes());
      if (fused_ops) CHECK(at::equal(got, want));
      else CHECK(RelativeError(got, want) < 1e-6);
      pos.add_(1);
    }
    CHECK(pos.item<int64_t>() == host.length);
    for (size_t l = 0; l < host.k.size(); ++l) {
      if (fused_ops) {
        CHECK(at::equal(device.k[l], host.k[l]));
        CHECK(at::equal(device.v[l], host.v[l]));
      } else {
        CHECK(RelativeError(device.k[l], host.k[l]) < 1e-6);
        CHECK(RelativeError(device.v[l], host.v[l]) < 1e-6);
      }
    }
  }
}

TEST_CASE("decode step: generation with the position on the device equals the host position's, token for token") {
  for (at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    CAPTURE(std::string(c10::toString(dtype)));
    Model m = TestModel(dtype);
    // Wide logit gaps, so that the argmax does not hinge on the order of a sum (bf16 rounds each op).
    m.lm_head.mul_(20.0);
    GenerateOptions host, device;
    host.max_new_tokens = device.max_new_tokens = 24;
    device.decode_step = DecodeStep::kDevicePosition;
    auto a = generate_greedy(m, {1, 7, 3}, host);
    auto b = generate_greedy(m, {1, 7, 3}, device);
    REQUIRE(a.ok());
    REQUIRE(b.ok());
    CHECK(b->tokens.size() == 24);
    CHECK(b->tokens == a->tokens);
    CHECK(b->host_reads == 1);  // the whole answer, in one copy, as the host position's

    // Stopping at end-of-sequence: the same tokens, read every kEosCheckTokens.
    for (size_t at : {size_t{0}, size_t{9}}) {
      Model stop_model = m;
      stop_model.config.eos_id = a->tokens[at];
      GenerateOptions h = host, d = device;
      h.ignore_eos = d.ignore_eos = false;
      auto ha = generate_greedy(stop_model, {1, 7, 3}, h);
      auto db = generate_greedy(stop_model, {1, 7, 3}, d);
      REQUIRE(ha.ok());
      REQUIRE(db.ok());
      CAPTURE(at);
      CHECK(db->tokens == ha->tokens);
      CHECK(db->ended_at_eos);
      CHECK(db->host_reads == ha->host_reads);
    }
  }
}

TEST_CASE("decode step: no host read, and the same ops every step (a CUDA graph's condition)") {
  const Model m = TestModel(at::kFloat);
  c10::InferenceMode inference;
  KvCache cache = kv_cache_create(m, 1, 16);
  (void)model_forward(m, kPrompt, &cache);
  at::Tensor pos = at::full({1}, 3, at::kLong);
  const at::Tensor input = at::full({1, 1}, 5, at::kLong);
  std::string first;
  for (int step = 0; step < 3; ++step) {
    const int64_t reads = compat::HostReads();
    compat::OpCounter counter;
    CHECK(testing::ScalarReadsIn([&] { (void)model_decode_step(m, input, pos, cache); }) == 0);  // at any depth
    pos.add_(1);
    CHECK(compat::HostReads() == reads);
    const std::string ops = counter.Describe();
    CHECK(ops.find("aten::item") == std::string::npos);
    CHECK(ops.find("aten::_local_scalar_dense") == std::string::npos);
    if (step == 0) {
      first = ops;
      MESSAGE("a decode step with its position on the device, " << m.layers.size() << " layers: " << counter.total()
                                                                 << " ops: " << ops);
    } else {
      CHECK(ops == first);
    }
  }
}

TEST_CASE("decode buckets: generations share a bucket's cache and buffers, and each equals its generation alone") {
  ModelConfig c = testing::TinyTestConfig();
  c.max_seq_len = 600;  // buckets of 256 and 512 positions, and the context's 600 above them
  Model m = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 7);
  m.lm_head.mul_(20.0);
  struct Request {
    std::vector<int> prompt;
    int64_t new_tokens;
  };
  // The second and third reuse the first's bucket after it held longer sequences (stale keys past their prompts).
  const std::vector<Request> requests = {{{1, 7, 3}, 40}, {{2, 9}, 12}, {{5, 4, 3, 2, 1}, 30}, {{1, 7, 3}, 300}, {{8}, 20}};
  for (DecodeStep step : {DecodeStep::kHostPosition, DecodeStep::kDevicePosition}) {
    CAPTURE(static_cast<int>(step));
    DecodeBuckets buckets;
    const void* first_cache = nullptr;
    for (const Request& r : requests) {
      CAPTURE(r.new_tokens);
      GenerateOptions alone, bucketed;
      alone.max_new_tokens = bucketed.max_new_tokens = r.new_tokens;
      alone.decode_step = DecodeStep::kHostPosition;
      bucketed.decode_step = step;
      auto a = generate_greedy(m, r.prompt, alone);
      auto b = generate_greedy(m, r.prompt, bucketed, nullptr, &buckets);
      REQUIRE(a.ok());
      REQUIRE(b.ok());
      CHECK(b->tokens == a->tokens);
      CHECK(b->host_reads == 1);
      const int64_t total = static_cast<int64_t>(r.prompt.size()) + r.new_tokens;
      const DecodeBucket& bucket = buckets.For(m, total);
      CHECK(bucket.capacity == (total <= 256 ? 256 : 512));
      CHECK(bucket.captures == 0);  // no graph off CUDA
      if (first_cache == nullptr) first_cache = bucket.cache.k[0].data_ptr();
      if (total <= 256) CHECK(bucket.cache.k[0].data_ptr() == first_cache);  // the same buffers, not new ones
    }
    CHECK(buckets.size() == 2);
    CHECK(buckets.For(m, 513).capacity == 600);  // capped at the model's context
    CHECK(buckets.For(m, 600).capacity == 600);
    CHECK(buckets.size() == 3);
  }
}

TEST_CASE("decode step: a CUDA graph is refused off CUDA, with a reason") {
  const Model m = TestModel(at::kFloat);
  GenerateOptions o;
  o.decode_step = DecodeStep::kCudaGraph;
  auto g = generate_greedy(m, {1, 7, 3}, o);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().message() == "generate: a CUDA graph needs a model on a CUDA device, not cpu");
  compat::CudaGraph graph;
  bool ran = false;
  CHECK_FALSE(graph.Capture([&] { ran = true; }, at::Device(at::kCPU)));
  CHECK_FALSE(ran);
}

}  // namespace
}  // namespace native
}  // namespace protocol
