#ifndef PROTOCOL_CLI_EXIT_CODE_H_
#define PROTOCOL_CLI_EXIT_CODE_H_

// The command line's exit codes:
//   0 ok · 1 a case failed or a regression was found · 2 bad input or usage ·
//   3 internal error.

namespace protocol {

enum ExitCode { kExitOk = 0, kExitCaseFailed = 1, kExitBadInput = 2, kExitInternal = 3 };

}  // namespace protocol

#endif  // PROTOCOL_CLI_EXIT_CODE_H_
