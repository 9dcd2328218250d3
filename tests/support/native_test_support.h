#ifndef PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_
#define PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_

// Include this instead of <doctest/doctest.h> in tests that use ATen: Debian's
// libtorch is built with glog, whose CHECK/CHECK_EQ/... macros would silently
// replace doctest's (an aborting check that doctest never counts). ATen comes
// first, glog's macros are dropped, then doctest defines its own.

#include <ATen/ATen.h>

#undef CHECK
#undef CHECK_EQ
#undef CHECK_NE
#undef CHECK_LE
#undef CHECK_LT
#undef CHECK_GE
#undef CHECK_GT

#include <doctest/doctest.h>

#include <cstdint>

#include "backends/native/model/model_config.h"

namespace protocol::testing {

// The tiny Llama-2 the native tests build: dim 32, 4 query heads sharing 2
// kv heads (GQA), feed-forward 64, sequences up to 64 tokens; `vocab_size`
// and `n_layers` as the test needs (259: the byte tokenizer's vocabulary).
inline native::ModelConfig TinyTestConfig(int64_t vocab_size = 50, int64_t n_layers = 2) {
  native::ModelConfig c;
  c.name = "test";
  c.dim = 32;
  c.n_layers = n_layers;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.hidden_dim = 64;
  c.vocab_size = vocab_size;
  c.max_seq_len = 64;
  return c;
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_
