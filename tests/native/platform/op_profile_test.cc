// Where a profiled window's time went (op_profile.h): the device's kernels
// summed by name and their busy time as a union over streams, the host's
// outermost ops summed by name; and compat::OpProfiler's spans of real ops.
#include "native_test_support.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

#include "backends/native/platform/op_profile.h"
#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {
namespace {

compat::ProfiledSpan Span(const std::string& name, bool on_device, int64_t lane, int64_t start_ns, int64_t duration_ns) {
  compat::ProfiledSpan span;
  span.name = name;
  span.on_device = on_device;
  span.lane = lane;
  span.start_ns = start_ns;
  span.duration_ns = duration_ns;
  return span;
}

const ProfileRow* Row(const std::vector<ProfileRow>& rows, const std::string& name) {
  auto it = std::find_if(rows.begin(), rows.end(), [&](const ProfileRow& r) { return r.name == name; });
  return it == rows.end() ? nullptr : &*it;
}

TEST_CASE("op profile: the device's time is summed by kernel, its busy time is the union over streams") {
  // Stream 7: gemm 0–40, gemm 50–90; stream 9: copy 30–60 (overlaps both); idle 90–100.
  const ProfileSummary s = SummarizeProfile({Span("gemm", true, 7, 0, 40), Span("gemm", true, 7, 50, 40),
                                             Span("copy", true, 9, 30, 30)},
                                            100e-9);
  REQUIRE(s.device.size() == 2);
  CHECK(s.device[0].name == "gemm");  // the longest total first
  CHECK(s.device[0].calls == 2);
  CHECK(s.device[0].seconds == doctest::Approx(80e-9));
  CHECK(s.device[1].name == "copy");
  CHECK(s.device_busy_seconds == doctest::Approx(90e-9));  // 0–90, not 40 + 40 + 30
  CHECK(s.host.empty());
}

TEST_CASE("op profile: the host's ops are summed by self time, thread by thread") {
  // Thread 1: linear 0–100 calling matmul 0–90 calling mm 10–80; then add 100–110 (starts as linear
  // ends). Thread 2: mm 20–50, called by nothing on its own thread although linear runs on thread 1.
  const ProfileSummary s = SummarizeProfile({Span("aten::mm", false, 1, 10, 70), Span("aten::matmul", false, 1, 0, 90),
                                             Span("aten::linear", false, 1, 0, 100), Span("aten::add", false, 1, 100, 10),
                                             Span("aten::mm", false, 2, 20, 30)},
                                            200e-9);
  CHECK(s.device.empty());
  CHECK(s.device_busy_seconds == 0);
  REQUIRE(s.host.size() == 4);
  CHECK(s.host[0].name == "aten::mm");  // the longest self time first
  CHECK(s.host[0].calls == 2);
  CHECK(s.host[0].seconds == doctest::Approx(100e-9));  // 70 + 30
  CHECK(s.host[1].name == "aten::matmul");
  CHECK(s.host[1].seconds == doctest::Approx(20e-9));  // 90 less mm's 70
  const ProfileRow* linear = Row(s.host, "aten::linear");
  REQUIRE(linear != nullptr);
  CHECK(linear->seconds == doctest::Approx(10e-9));  // 100 less matmul's 90 (not mm's again)
  const ProfileRow* add = Row(s.host, "aten::add");
  REQUIRE(add != nullptr);
  CHECK(add->seconds == doctest::Approx(10e-9));
  double total = 0;
  for (const ProfileRow& row : s.host) total += row.seconds;
  CHECK(total == doctest::Approx(140e-9));  // thread 1 busy 0–110, thread 2 busy 20–50
}

TEST_CASE("op profile: the table gives time per unit and share of the window, cuts long names, sums the rest") {
  const std::string long_name = "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
                                "(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8::Params)";
  // Two tokens in a window of 1 ms: a kernel of 0.5 ms in all, two of 0.1 ms each, one host op.
  const ProfileSummary s = SummarizeProfile({Span(long_name, true, 7, 0, 500000), Span("a", true, 7, 600000, 100000),
                                             Span("b", true, 7, 800000, 100000), Span("aten::linear", false, 1, 0, 200000)},
                                            1e-3);
  const std::string text = FormatProfile(s, 2, 2, "token");
  INFO(text);
  CHECK(text.find("profile: 2 token(s) in 0.001 s; device busy 0.001 s (70 % of the window)") != std::string::npos);
  CHECK(text.find("ms/token") != std::string::npos);
  CHECK(text.find("     0.250   50.0%        1  void cutlass::Kernel<") != std::string::npos);  // 0.5 ms / 2 tokens
  CHECK(text.find("...") != std::string::npos);
  CHECK(text.find(long_name) == std::string::npos);
  CHECK(text.find("(1 more)") != std::string::npos);
  CHECK(text.find("op (self time)") != std::string::npos);
  CHECK(text.find("aten::linear") != std::string::npos);

  const std::string host_only = FormatProfile(SummarizeProfile({Span("aten::mm", false, 1, 0, 10)}, 1e-6), 5, 1, "step");
  CHECK(host_only.find("no kernel recorded") != std::string::npos);
}

TEST_CASE("op profile: libtorch's profiler records the host's ops, with the ops they call") {
  at::Tensor x = at::randn({256, 512});  // a product of ~70 MFLOP: milliseconds, not the clock's microsecond
  at::Tensor w = at::randn({512, 512});
  compat::OpProfiler profiler(/*device_kernels=*/false);
  at::Tensor y = at::linear(x, w).relu();
  const std::vector<compat::ProfiledSpan> spans = profiler.Stop();
  CHECK(profiler.Stop().empty());  // stopped once
  REQUIRE(!spans.empty());
  for (const compat::ProfiledSpan& span : spans) {
    CHECK_FALSE(span.on_device);
    CHECK(span.duration_ns >= 0);
  }
  const ProfileSummary s = SummarizeProfile(spans, 1.0);
  const ProfileRow* linear = Row(s.host, "aten::linear");
  const ProfileRow* mm = Row(s.host, "aten::mm");  // linear calls matmul calls mm (or addmm)
  const ProfileRow* addmm = Row(s.host, "aten::addmm");
  REQUIRE(linear != nullptr);
  REQUIRE((mm != nullptr || addmm != nullptr));
  CHECK(linear->calls == 1);
  CHECK(Row(s.host, "aten::relu") != nullptr);
  CHECK(s.device.empty());
  // linear's span holds the product's: its self time is well under its span.
  for (const compat::ProfiledSpan& span : spans)
    if (span.name == "aten::linear") CHECK(linear->seconds * 1e9 < 0.5 * static_cast<double>(span.duration_ns));

  // The tests' scalar-read counter (native_test_support.h): a read is counted unless it happens
  // inside one of the ops it is told to except.
  CHECK(testing::ScalarReadsIn([&] { (void)x.sum().item<float>(); }) == 1);
  CHECK(testing::ScalarReadsIn([&] { (void)x.sum().item<float>(); }, testing::CpuFusedAdamW()) == 1);
  CHECK(testing::ScalarReadsIn([&] { (void)x.sum(); }) == 0);

  // One at a time: a second refuses to start while the first runs.
  {
    compat::OpProfiler first(false);
    CHECK_THROWS(compat::OpProfiler(false));
  }
  // A profiler dropped without Stop leaves none running: the next one starts.
  { compat::OpProfiler dropped(false); }
  compat::OpProfiler again(false);
  (void)at::relu(x);
  CHECK(Row(SummarizeProfile(again.Stop(), 1.0).host, "aten::relu") != nullptr);
}

}  // namespace
}  // namespace native
}  // namespace protocol
