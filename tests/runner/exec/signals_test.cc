#include <doctest/doctest.h>

#include <signal.h>

#include "runner/exec/signals.h"

using namespace protocol;

namespace {
void* CurrentHandler(int sig) {
  struct sigaction sa;
  sigaction(sig, nullptr, &sa);
  return reinterpret_cast<void*>(sa.sa_handler);
}
}  // namespace

TEST_CASE("Stop signals raise the StopFlag; the second SIGINT restores the default action") {
  StopFlag flag;
  InstallStopSignals(&flag);
  CHECK(CurrentHandler(SIGPIPE) == reinterpret_cast<void*>(SIG_IGN));

  raise(SIGTERM);
  CHECK(flag.requested());
  flag.Reset();

  raise(SIGINT);
  CHECK(flag.requested());
  CHECK(CurrentHandler(SIGINT) != reinterpret_cast<void*>(SIG_DFL));
  flag.Reset();

  raise(SIGINT);  // second Ctrl-C: still a stop request, and the next one kills
  CHECK(flag.requested());
  CHECK(CurrentHandler(SIGINT) == reinterpret_cast<void*>(SIG_DFL));

  UninstallStopSignals();
  CHECK(CurrentHandler(SIGTERM) == reinterpret_cast<void*>(SIG_DFL));
}
