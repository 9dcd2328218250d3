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

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "backends/native/model/model_config.h"
#include "backends/native/platform/torch_compat.h"

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

// The rendezvous stores of `world` ranks run as threads of this process:
// rank 0's server on a port the kernel picks (nothing can take it between
// choosing and binding), then one client per other rank; index = rank.
inline std::vector<std::shared_ptr<native::compat::CommStore>> LocalStores(int world, int64_t timeout_ms = 30000) {
  std::vector<std::shared_ptr<native::compat::CommStore>> stores;
  stores.push_back(native::compat::CommStoreListen("127.0.0.1", 0, world, timeout_ms));
  const int port = native::compat::CommStorePort(*stores[0]);
  for (int r = 1; r < world; ++r) stores.push_back(native::compat::CommStoreJoin("127.0.0.1", port, world, timeout_ms));
  return stores;
}

// The scalars `work` reads back from its tensors (`.item()`, whose op is
// aten::_local_scalar_dense: on a GPU, a wait for the device), counted at any
// depth through libtorch's profiler: inside other ops too, which OpCounter's
// outermost count does not see. Reads inside an op named in `except_inside`
// (on the same thread) are not counted: an op known to read host tensors on
// the CPU alone.
inline int64_t ScalarReadsIn(const std::function<void()>& work, const std::vector<std::string>& except_inside = {}) {
  native::compat::OpProfiler profiler(/*device_kernels=*/false);
  work();
  const std::vector<native::compat::ProfiledSpan> spans = profiler.Stop();
  auto excepted = [&](const native::compat::ProfiledSpan& read) {
    for (const native::compat::ProfiledSpan& outer : spans)
      if (outer.lane == read.lane && outer.start_ns <= read.start_ns &&
          read.start_ns + read.duration_ns <= outer.start_ns + outer.duration_ns &&
          std::find(except_inside.begin(), except_inside.end(), outer.name) != except_inside.end())
        return true;
    return false;
  };
  int64_t reads = 0;
  for (const native::compat::ProfiledSpan& span : spans)
    reads += span.name == "aten::_local_scalar_dense" && !excepted(span);
  return reads;
}

// libtorch's CPU kernel of fused AdamW (2.4 on) reads each parameter's step
// count, a host tensor, with .item(): on the CPU only, and not a wait for a
// device (the CUDA kernel reads the counts on the device).
inline const std::vector<std::string>& CpuFusedAdamW() {
  static const std::vector<std::string> ops = {"aten::_fused_adamw_"};
  return ops;
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_NATIVE_TEST_SUPPORT_H_
