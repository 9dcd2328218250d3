// `protocol`'s side of native_commands.h: the subcommands that need libtorch
// are carried out by `protocol-native`, the program beside this one.

#include <limits.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cli/native_commands.h"

namespace protocol {
namespace {

std::vector<char*>& CommandLine() {
  static std::vector<char*> argv;
  return argv;
}

// The directory of this program's file (/proc/self/exe), "" when unknown.
std::string OwnDirectory() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return "";
  const std::string self(path, static_cast<size_t>(n));
  const size_t slash = self.rfind('/');
  return slash == std::string::npos ? "" : self.substr(0, slash);
}

// Replaces this process with protocol-native and the same arguments; returns
// only when that fails (exit code 3, saying why).
int RunInNativeProgram() {
  const std::string program = OwnDirectory() + "/protocol-native";
  std::vector<char*> argv = CommandLine();
  argv.at(0) = const_cast<char*>(program.c_str());
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(program.c_str(), argv.data());
  std::fprintf(stderr,
               "protocol: cannot start %s (%s): it runs the subcommands that need libtorch (run, validate, "
               "calibrate, backends, --version) and is built beside protocol (cmake --build build)\n",
               program.c_str(), std::strerror(errno));
  return kExitInternal;
}

}  // namespace

void StartProgram(int argc, char** argv) { CommandLine().assign(argv, argv + argc); }

int CmdRun(Args&) { return RunInNativeProgram(); }
int CmdValidate(Args&) { return RunInNativeProgram(); }
int CmdBackends(Args&) { return RunInNativeProgram(); }
int CmdCalibrate(Args&) { return RunInNativeProgram(); }
int CmdWorker(Args&) { return RunInNativeProgram(); }

std::string NativeBuildFeatures() {
  std::exit(RunInNativeProgram());  // --version: protocol-native prints it
}

}  // namespace protocol
