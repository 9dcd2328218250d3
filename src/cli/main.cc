// protocol: declarative test-protocol runner for LLM workloads.
// Everything lives in cli.cc; this file only turns escaped exceptions into
// exit code 3 (internal error) so nothing ends in an abort.

#include <cstdio>
#include <exception>

#include "cli/cli.h"

int main(int argc, char** argv) {
  try {
    return protocol::RunCli(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "protocol: internal error: %s\n", e.what());
  } catch (...) {
    std::fprintf(stderr, "protocol: internal error: unknown exception\n");
  }
  return protocol::kExitInternal;
}
