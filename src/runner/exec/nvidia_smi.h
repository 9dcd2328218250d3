#ifndef PROTOCOL_RUNNER_EXEC_NVIDIA_SMI_H_
#define PROTOCOL_RUNNER_EXEC_NVIDIA_SMI_H_

// Reading the GPUs as the methodology's tester does: nvidia-smi's query mode,
// left running with a loop interval so that the driver is opened once per
// case, not once per reading:
//
//   nvidia-smi --query-gpu=index,utilization.gpu,memory.used,power.draw,clocks.sm,temperature.gpu
//              --format=csv,noheader,nounits -lms 1000
//
// prints one line per GPU per interval, e.g. "0, 97, 70123, 512.30, 1980, 61"
// (memory in MiB, power in W, clock in MHz, temperature in °C). A field the
// GPU does not report reads "[N/A]" or "[Not Supported]" and is left out.
//
// Why nvidia-smi and not NVML through dlopen: it is what the methodology
// names, its readings are the same NVML calls, the CPU build needs nothing of
// NVIDIA's, the rigs' containers have it from the NVIDIA container toolkit,
// and the tests put a script of the same name on PATH (docs/runner.md,
// "Sampling").

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/store/records.h"

namespace protocol {

// The command above, reading every `interval_seconds` (at least 0.1 s).
std::vector<std::string> NvidiaSmiArgv(double interval_seconds);

// One output line → its GPU's readings as samples of device "gpu<index>"
// (seconds and node left 0 and ""), memory in bytes. nullopt for a line that
// is not a reading (an error message, a blank line).
std::optional<std::vector<TelemetrySample>> ParseNvidiaSmiLine(std::string_view line);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_NVIDIA_SMI_H_
