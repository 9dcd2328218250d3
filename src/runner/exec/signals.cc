#include "runner/exec/signals.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace protocol {
namespace {

std::atomic<StopFlag*> g_flag{nullptr};
volatile sig_atomic_t g_interrupts = 0;  // SIGINTs seen since InstallStopSignals

void Say(const char* text) {
  // write(2) is async-signal-safe; a short write to a terminal is fine to lose.
  ssize_t ignored = write(STDERR_FILENO, text, std::strlen(text));
  (void)ignored;
}

void SetAction(int sig, void (*handler)(int)) {
  struct sigaction sa;
  std::memset(&sa, 0, sizeof sa);
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(sig, &sa, nullptr);
}

// Runs in signal context: only lock-free atomics, sigaction and write.
void OnStopSignal(int sig) {
  if (StopFlag* flag = g_flag.load()) flag->Request();
  if (sig == SIGINT) {
    g_interrupts = g_interrupts + 1;
    if (g_interrupts == 1) {
      Say("\nprotocol: stop requested; ending the running case (Ctrl-C twice more to kill)\n");
    } else {
      SetAction(SIGINT, SIG_DFL);  // sigaction is async-signal-safe (POSIX)
      Say("\nprotocol: press Ctrl-C once more to kill protocol now\n");
    }
  } else {
    Say("\nprotocol: SIGTERM; ending the running case\n");
  }
}

}  // namespace

void InstallStopSignals(StopFlag* flag) {
  g_flag.store(flag);
  g_interrupts = 0;
  SetAction(SIGINT, &OnStopSignal);
  SetAction(SIGTERM, &OnStopSignal);
  SetAction(SIGPIPE, SIG_IGN);
}

void UninstallStopSignals() {
  SetAction(SIGINT, SIG_DFL);
  SetAction(SIGTERM, SIG_DFL);
  g_flag.store(nullptr);
  g_interrupts = 0;
}

}  // namespace protocol
