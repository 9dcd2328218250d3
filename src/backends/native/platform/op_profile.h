#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_OP_PROFILE_H_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_OP_PROFILE_H_

// Where a profiled window's time went, from compat::OpProfiler's spans: each
// device kernel's time summed by name, the share of the window in which some
// kernel ran, and the host's ops' self time summed by name (as torch.profiler's
// "Self CPU"). A window whose device was busy for most of it is bound by its
// kernels; one whose device sat idle is bound by the host that launches them
// (protocol_bench --profile).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "backends/native/platform/torch_compat.h"

namespace protocol {
namespace native {

struct ProfileRow {
  std::string name;
  int64_t calls = 0;
  double seconds = 0;  // summed over the calls
};

struct ProfileSummary {
  double window_seconds = 0;       // the window's wall time, as its caller measured it
  double device_busy_seconds = 0;  // the union of the device spans: time in which some kernel ran
  std::vector<ProfileRow> device;  // kernels, copies and memsets by name, longest total first
  // The host's ops by name, longest total first, each with its self time: its
  // duration less that of the ops it called (the spans directly inside it on
  // its thread), so that the rows add up to the time the host spent in ops.
  // calls counts every span of the name, called or calling. With Kineto on
  // CUDA, the runtime's calls (cudaLaunchKernel, cudaDeviceSynchronize…) come
  // on threads of their own numbering: they are rows of their own, and the
  // ops that made them keep that time in their self time too.
  std::vector<ProfileRow> host;
};

ProfileSummary SummarizeProfile(const std::vector<compat::ProfiledSpan>& spans, double window_seconds);

// The window's lines, as protocol_bench prints them: the window and the
// device's busy share, then the first `rows` rows of each side with their time
// per unit (`per` units in the window: "step", "token") and share of the window.
// Names longer than 100 characters are cut (CUDA kernels' template names).
std::string FormatProfile(const ProfileSummary& summary, size_t rows, double per, const std::string& unit);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_OP_PROFILE_H_
