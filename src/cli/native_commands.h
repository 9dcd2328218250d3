#ifndef PROTOCOL_CLI_NATIVE_COMMANDS_H_
#define PROTOCOL_CLI_NATIVE_COMMANDS_H_

// The subcommands that need the backends, and with them libtorch: run,
// validate, calibrate, backends, worker, and --version (which names the libtorch build).
//
// Two programs share the command table of cli.cc and differ only here:
//   protocol-native  links native_commands.cc: it runs these itself.
//   protocol         links native_dispatch.cc: each of these replaces the
//                    process with `protocol-native` from the same directory,
//                    same arguments (execv: same pid, terminal and signals),
//                    so list, show, report, import, export and compare never
//                    load libtorch (its start-up alone is ~0.45 s and
//                    ~160 MiB: docs/performance.md).
// Either way the user sees one program: `protocol run ...` is
// `protocol-native run ...`.

#include <string>

#include "cli/subcommand.h"

namespace protocol {

// Called first by RunCli, each program's own start: protocol remembers the
// command line a dispatch passes on unchanged; protocol-native turns libtorch's
// cuDNN use off (torch_compat.h: TurnOffCudnn) before any tensor work.
void StartProgram(int argc, char** argv);

int CmdRun(Args& a);
int CmdValidate(Args& a);
int CmdBackends(Args& a);
int CmdCalibrate(Args& a);
int CmdWorker(Args& a);
// What the native build can do, for --version (build_capabilities.h:
// "libtorch 1.13.0, CPU only, NF4 kernel absent, cuDNN off").
std::string NativeBuildFeatures();

}  // namespace protocol

#endif  // PROTOCOL_CLI_NATIVE_COMMANDS_H_
