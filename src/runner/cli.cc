#include "runner/cli.h"

#include <CLI/CLI.hpp>

namespace protocol {

int RunCli(int argc, char** argv) {
  CLI::App app{"protocol: declarative test-protocol runner for LLM workloads"};
  CLI11_PARSE(app, argc, argv);
  return kExitOk;
}

}  // namespace protocol
