#ifndef PROTOCOL_CLI_CLI_H_
#define PROTOCOL_CLI_CLI_H_

// The command line (CLI11 is included only in cli.cc). Exit codes:
//   0 ok · 1 a case failed or a regression was found · 2 bad input or usage ·
//   3 internal error.

namespace protocol {

enum ExitCode { kExitOk = 0, kExitCaseFailed = 1, kExitBadInput = 2, kExitInternal = 3 };

int RunCli(int argc, char** argv);

}  // namespace protocol

#endif  // PROTOCOL_CLI_CLI_H_
