#ifndef PROTOCOL_BACKENDS_NATIVE_PLATFORM_HOST_MEMORY_H_
#define PROTOCOL_BACKENDS_NATIVE_PLATFORM_HOST_MEMORY_H_

// Resident memory of this process (Linux), for the memory figures the native
// backends store: the one-process backend's peak, and each rank's peak and its
// growth over the rank's baseline (docs/distributed.md).

#include <cstdint>
#include <optional>

namespace protocol {
namespace native {

// RSS now: VmRSS of /proc/self/status, in bytes; nullopt where unreadable.
std::optional<int64_t> CurrentRssBytes();
// Peak RSS since the process started: getrusage ru_maxrss (kB on Linux) · 1024.
int64_t PeakRssBytes();
// This host's physical memory: sysconf(_SC_PHYS_PAGES) · sysconf(_SC_PAGESIZE); 0 where unknown.
int64_t PhysicalMemoryBytes();

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PLATFORM_HOST_MEMORY_H_
