#ifndef PROTOCOL_RUNNER_EXEC_NET_DEV_H_
#define PROTOCOL_RUNNER_EXEC_NET_DEV_H_

// The bytes each network interface has sent and received, as bmon reads them:
// /proc/net/dev, whose lines after two header lines are
//
//   "  eth0: 123456 789 0 0 0 0 0 0  654321 987 0 0 0 0 0 0"
//           rx bytes ...              tx bytes (the 9th number) ...
//
// The file shows the interfaces of the reader's network namespace: a rank in
// an emulated node's namespace sees that node's interfaces (rehearsal.md).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace protocol {

struct InterfaceCounters {
  std::string name;  // "eth0", "lo"
  uint64_t received_bytes = 0;
  uint64_t sent_bytes = 0;
};

// The interfaces of /proc/net/dev's text, in file order (loopback included);
// lines that are not an interface's are skipped.
std::vector<InterfaceCounters> ParseProcNetDev(std::string_view text);

// The outside thing: where the counters come from (a file; a string in tests).
class NetMeter {
 public:
  virtual ~NetMeter() = default;
  // nullopt when the counters cannot be read.
  virtual std::optional<std::vector<InterfaceCounters>> Read() = 0;
};

// Reads a file in /proc/net/dev's format: this process's namespace by default.
class ProcNetMeter : public NetMeter {
 public:
  explicit ProcNetMeter(std::string path = "/proc/net/dev") : path_(std::move(path)) {}
  std::optional<std::vector<InterfaceCounters>> Read() override;

 private:
  std::string path_;
};

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_NET_DEV_H_
