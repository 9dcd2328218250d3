#include "runner/exec/net_dev.h"

#include <fstream>
#include <sstream>

#include "runner/base/text.h"

namespace protocol {

std::vector<InterfaceCounters> ParseProcNetDev(std::string_view text) {
  std::vector<InterfaceCounters> out;
  for (const std::string& line : Split(text, '\n')) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    InterfaceCounters c;
    c.name = Trim(std::string_view(line).substr(0, colon));
    if (c.name.empty() || c.name.find(' ') != std::string::npos || c.name.find('|') != std::string::npos)
      continue;
    std::istringstream numbers(line.substr(colon + 1));
    uint64_t fields[9];
    int read = 0;
    while (read < 9 && numbers >> fields[read]) ++read;
    if (read < 9) continue;
    c.received_bytes = fields[0];
    c.sent_bytes = fields[8];
    out.push_back(std::move(c));
  }
  return out;
}

std::optional<std::vector<InterfaceCounters>> ProcNetMeter::Read() {
  std::ifstream in(path_);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  std::vector<InterfaceCounters> out = ParseProcNetDev(text.str());
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace protocol
