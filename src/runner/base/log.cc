#include "runner/base/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

namespace protocol {

void InitLogging(const std::string& level) {
  auto logger = spdlog::stderr_color_mt("protocol");
  logger->set_pattern("%^[%l]%$ %v");
  if (level == "quiet") logger->set_level(spdlog::level::warn);
  else if (level == "debug") logger->set_level(spdlog::level::debug);
  else logger->set_level(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace protocol
