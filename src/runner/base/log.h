#ifndef PROTOCOL_RUNNER_BASE_LOG_H_
#define PROTOCOL_RUNNER_BASE_LOG_H_

// Logging: the one place that includes spdlog. Use spdlog::info/warn/error
// through this header. Messages go to stderr; the terminal progress line is
// separate (runner/exec/progress.h).

#include <spdlog/spdlog.h>

namespace protocol {

// "quiet" | "info" | "debug"; called once by main.
void InitLogging(const std::string& level);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_LOG_H_
