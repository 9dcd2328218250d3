// compat::CpuMemoryWatch (torch_compat.h): the CPU allocator's bytes while the
// watch lives, counted for tensors and for raw blocks. ATen's CPU matmul takes
// scratch memory through c10::Allocator::raw_allocate on some paths (bf16
// under load, seen in the LoRA test); that call requires a block whose data
// pointer is its context, which the watch's blocks must be.
#include "native_test_support.h"

#include <c10/core/CPUAllocator.h>
#include <doctest/doctest.h>

#include <cstring>

#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

TEST_CASE("cpu memory watch: tensors are counted while alive, and the peak stays") {
  compat::CpuMemoryWatch watch;
  {
    at::Tensor t = at::empty({1 << 20}, at::kFloat);  // 4 MiB
    CHECK(watch.live_bytes() == 4 << 20);
    CHECK(watch.largest_bytes() == 4 << 20);
  }
  CHECK(watch.live_bytes() == 0);
  CHECK(watch.peak_bytes() == 4 << 20);
}

TEST_CASE("cpu memory watch: a raw block is handed out, counted and taken back") {
  compat::CpuMemoryWatch watch;
  c10::Allocator* allocator = c10::GetCPUAllocator();
  void* block = allocator->raw_allocate(1 << 16);  // asserted on the watch's blocks before
  REQUIRE(block != nullptr);
  std::memset(block, 7, 1 << 16);
  CHECK(watch.live_bytes() == 1 << 16);
  allocator->raw_deallocate(block);
  CHECK(watch.live_bytes() == 0);
  CHECK(watch.peak_bytes() == 1 << 16);
  // A block of nothing is not counted, and frees without harm.
  const c10::DataPtr empty = allocator->allocate(0);
  CHECK(watch.live_bytes() == 0);
}

}  // namespace
}  // namespace native
}  // namespace protocol
