#include "cli/subcommand.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runner/base/log.h"
#include "runner/base/text.h"

namespace protocol {

void PrintError(const std::string& text) { std::fprintf(stderr, "protocol: %s\n", text.c_str()); }

int ExitFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk: return kExitOk;
    case Status::Code::kInvalidArgument:
    case Status::Code::kNotFound: return kExitBadInput;
    case Status::Code::kCorruption:
    case Status::Code::kIoError:
    case Status::Code::kInternal: return kExitInternal;
  }
  return kExitInternal;
}

int Fail(const Status& status) {
  PrintError(status.message());
  return ExitFor(status);
}

std::unique_ptr<Store> OpenOrReport(const std::string& path, int* exit_code, DbAccess access) {
  std::error_code ec;
  if (access == DbAccess::kMustExist && path != ":memory:" && !std::filesystem::exists(path, ec)) {
    PrintError(fmt::format("no database at {} (`protocol run` and `protocol import` create one; "
                           "name another with --db)",
                           path));
    *exit_code = kExitBadInput;
    return nullptr;
  }
  auto store = OpenStore(path);
  if (!store.ok()) {
    const std::string& why = store.status().message();  // names the path already, as a rule
    PrintError(StartsWith(why, path + ": ") ? why : fmt::format("cannot open database {}: {}", path, why));
    *exit_code = ExitFor(store.status());
    return nullptr;
  }
  return std::move(store).value();
}

int WriteOutput(const std::string& text, const std::string& path) {
  if (path.empty() || path == "-") {
    std::fwrite(text.data(), 1, text.size(), stdout);
    return kExitOk;
  }
  std::error_code ec;
  auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  std::ofstream out(path, std::ios::binary);
  out << text;
  out.close();
  if (!out) {
    PrintError(CannotWrite(path, errno));
    return kExitInternal;
  }
  spdlog::info("wrote {}", path);
  return kExitOk;
}

Result<std::string> PickFormat(const std::string& flag, const std::string& file,
                               const std::vector<Extension>& extensions, const std::string& fallback) {
  std::string by_extension;
  for (const Extension& e : extensions)
    if (EndsWith(file, e.suffix)) by_extension = e.format;
  if (flag.empty()) return by_extension.empty() ? fallback : by_extension;
  if (!by_extension.empty() && by_extension != flag)
    return Status::InvalidArgument(fmt::format(
        "--format {} contradicts the file name {} (a {} file): drop --format or rename the file", flag, file,
        by_extension));
  return flag;
}

}  // namespace protocol
