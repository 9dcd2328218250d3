#ifndef PROTOCOL_CLI_CLI_H_
#define PROTOCOL_CLI_CLI_H_

// The command line (CLI11 is included only in cli.cc); its exit codes: exit_code.h.

#include "cli/exit_code.h"

namespace protocol {

int RunCli(int argc, char** argv);

}  // namespace protocol

#endif  // PROTOCOL_CLI_CLI_H_
