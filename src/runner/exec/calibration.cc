#include "runner/exec/calibration.h"

#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <fstream>

#include "runner/base/json.h"
#include "runner/base/text.h"
#include "runner/store/records.h"

namespace protocol {
namespace fs = std::filesystem;

std::string CalibrationPathFor(const std::string& db_path) {
  return (fs::path(db_path).parent_path() / "calibration.json").string();
}

std::string ThisHost() {
  char here[256] = {};
  if (::gethostname(here, sizeof here - 1) != 0) return "localhost";
  return here;
}

bool CalibrationContended(const HostCalibration& c) { return c.contention >= metric::kContendedShare; }

std::string CalibrationContentionNote(const HostCalibration& c) {
  if (!CalibrationContended(c)) return "";
  return fmt::format("measured while other processes took {:.0f} % of the CPU", 100 * c.contention);
}

bool PreferRemeasured(const HostCalibration& stored, const HostCalibration& remeasured) {
  return remeasured.contention < stored.contention;
}

namespace {

Result<Json> ReadJsonFile(const std::string& path) {
  auto text = ReadFileText(path);
  if (!text.ok()) return text.status();
  Json j = Json::parse(text.value(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object() || !j.contains("hosts") || !j["hosts"].is_object())
    return Status::Corruption(fmt::format("{}: not a calibration file (JSON with \"hosts\"); run `protocol calibrate` "
                                          "again to replace it",
                                          path));
  return j;
}

}  // namespace

Result<std::optional<HostCalibration>> ReadCalibration(const std::string& path, const std::string& host) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::optional<HostCalibration>();
  auto j = ReadJsonFile(path);
  if (!j.ok()) return j.status();
  const Json& hosts = (*j)["hosts"];
  if (!hosts.contains(host)) return std::optional<HostCalibration>();
  const Json& e = hosts[host];
  HostCalibration c;
  c.host = host;
  auto number = [&](const char* key) { return e.contains(key) && e[key].is_number() ? e[key].get<double>() : 0.0; };
  c.measured_at = e.contains("measured_at") && e["measured_at"].is_string() ? e["measured_at"].get<std::string>() : "";
  c.cpu_flops = number("cpu_flops");
  c.memory_bytes_per_second = number("memory_bytes_per_second");
  c.op_seconds = number("op_seconds");
  c.process_start_seconds = number("process_start_seconds");
  c.threads = static_cast<int>(number("threads"));
  c.contention = number("contention");  // absent in files written before it was measured
  if (!c.ok())
    return Status::Corruption(fmt::format("{}: the entry of host '{}' lacks cpu_flops or memory_bytes_per_second; "
                                          "run `protocol calibrate` again",
                                          path, host));
  return std::optional<HostCalibration>(c);
}

Status WriteCalibration(const std::string& path, const HostCalibration& c) {
  Json j = {{"format", 1}, {"hosts", Json::object()}};
  std::error_code ec;
  if (fs::exists(path, ec)) {
    auto old = ReadJsonFile(path);
    if (old.ok()) j = *old;  // a damaged file is replaced
  }
  j["hosts"][c.host] = {{"measured_at", c.measured_at},
                        {"cpu_flops", c.cpu_flops},
                        {"memory_bytes_per_second", c.memory_bytes_per_second},
                        {"op_seconds", c.op_seconds},
                        {"process_start_seconds", c.process_start_seconds},
                        {"threads", c.threads},
                        {"contention", c.contention}};
  const fs::path parent = fs::path(path).parent_path();
  if (!parent.empty()) fs::create_directories(parent, ec);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << j.dump(2) << "\n";
    out.close();
    if (!out) return Status::IoError(CannotWrite(tmp, errno));
  }
  fs::rename(tmp, path, ec);
  if (ec) return Status::IoError(fmt::format("cannot write {}: {}", path, ec.message()));
  return Status::Ok();
}

}  // namespace protocol
