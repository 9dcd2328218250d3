// The decode check before a schedule whose step is not at the host's
// position (inference_request.h): its comparison of the two decodes, the
// fact's text either way, and a prompt that leaves no room.
#include "native_test_support.h"

#include <doctest/doctest.h>

#include "backends/native/inference_request.h"
#include "backends/native/model/model.h"
#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

TEST_CASE("decode check: equal tokens, the first token that parts, and a decode that stopped short") {
  DecodeCheck same = CompareDecodes({5, 9, 2}, {5, 9, 2});
  CHECK(same.equal);
  CHECK(same.text == "the first 3 tokens equal the host position's");
  DecodeCheck parted = CompareDecodes({5, 9, 2}, {5, 7, 2});
  CHECK_FALSE(parted.equal);
  CHECK(parted.text == "token 2 of the first 3 parts from the host position's (7 against 9); the tokens before it "
                       "are equal");
  DecodeCheck shorter = CompareDecodes({5, 9, 2}, {5, 9});
  CHECK_FALSE(shorter.equal);
  CHECK(shorter.text == "token 3 of the first 3 parts from the host position's (none against 2); the tokens before "
                        "it are equal");
}

TEST_CASE("decode check: the device step on a CPU model, and a prompt that fills the context") {
  ModelConfig c = testing::TinyTestConfig();
  Model m = model_create(c, at::TensorOptions().dtype(at::kFloat));
  model_init_random(m, 7);
  m.lm_head.mul_(20.0);  // no argmax hinges on a rounding
  auto checked = CheckDecodeStep(m, {1, 7, 3}, DecodeStep::kDevicePosition);
  REQUIRE(checked.ok());
  CHECK(checked->equal);
  CHECK(checked->text == "the first 16 tokens equal the host position's");
  auto full = CheckDecodeStep(m, std::vector<int>(static_cast<size_t>(c.max_seq_len), 1), DecodeStep::kDevicePosition);
  REQUIRE_FALSE(full.ok());
  CHECK(full.status().message() == fmt::format("decode check: the prompt ({} tokens) leaves no room in the model's "
                                               "context of {} positions",
                                               c.max_seq_len, c.max_seq_len));
}

}  // namespace
}  // namespace native
}  // namespace protocol
