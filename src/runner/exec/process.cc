// The system ProcessRunner: fork/exec in a fresh process group, output captured
// through one pipe, polled so that a deadline or a stop request is noticed
// within kPollMilliseconds.
//
// Lifecycle of one Run:
//   1. open the log (parent directories created), write the header line;
//   2. fork; the child joins a new process group (setpgid(0,0), also done by
//      the parent so neither order races), asks for SIGKILL when the runner
//      dies (PR_SET_PDEATHSIG: a kill -9 of the runner ends the command it
//      runs; what the command itself forked is its own), points stdin at /dev/null, stdout
//      and stderr at the pipe, chdirs to the workdir and execs (PATH search,
//      no shell); a chdir or exec failure travels back through a CLOEXEC
//      error pipe, so "it ran and failed" and "it never ran" stay distinct;
//   3. the parent polls the pipe, appends every chunk to the log, splits it
//      into lines for the callback, and watches the deadline and the StopFlag:
//      SIGTERM to the group, then SIGKILL to the group after kill_grace_seconds;
//   4. the child's end is noticed with waitid(WNOWAIT), which leaves it a
//      zombie: its pid, and so its process group id, cannot be reused while we
//      still signal the group. Grandchildren that keep the pipe open get
//      kOrphanGraceSeconds to finish writing, then the group is SIGKILLed —
//      always, so nothing is left behind — and only then is the child reaped;
//   5. the footer line ("exit code 3 after 1.23 s") closes the log entry.
//
// Lines: '\n' ends a line, and so does a lone '\r' (progress bars redraw with
// '\r'); "\r\n" is one line end. A line longer than kMaxLineBytes is
// delivered in pieces. A final partial line is delivered at EOF.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <string>
#include <fstream>
#include <iterator>
#include <vector>

#include "runner/base/clock.h"
#include "runner/base/placeholders.h"
#include "runner/base/text.h"
#include "runner/exec/process.h"

extern char** environ;

namespace protocol {
namespace {

constexpr int kPollMilliseconds = 20;
// How long output is still read after the child itself has exited while
// something it started keeps the pipe open.
constexpr double kOrphanGraceSeconds = 1.0;
// After the final SIGKILL, how long to wait for EOF before giving up on a
// process that escaped the group (setsid) and still holds the pipe.
constexpr double kAfterKillSeconds = 1.0;
constexpr size_t kMaxLineBytes = 1 << 20;

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

// What the child writes to the error pipe before _exit when it cannot exec.
struct ChildError {
  int stage;  // kStageChdir | kStageExec
  int error;  // errno
};
constexpr int kStageChdir = 1;
constexpr int kStageExec = 2;

// An fd closed on scope exit.
class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() { Close(); }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  void Reset(int fd) { Close(); fd_ = fd; }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

void WriteAll(int fd, const char* data, size_t size) {
  if (fd < 0) return;
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return;  // a full disk loses log text, never the run
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
}

void WriteAll(int fd, const std::string& text) { WriteAll(fd, text.data(), text.size()); }

// "$ prog 'arg with space'": each element quoted only when it needs it.
std::string QuoteCommand(const std::vector<std::string>& argv) {
  std::vector<std::string> parts;
  for (const auto& arg : argv) {
    bool plain = !arg.empty();
    for (char c : arg) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || std::strchr("-_./=:,+@%", c))) {
        plain = false;
        break;
      }
    }
    parts.push_back(plain ? arg : ShellQuote(arg));
  }
  return Join(parts, " ");
}

// Splits output into lines (see the file comment) and hands them on.
class LineSplitter {
 public:
  explicit LineSplitter(const LineCallback& on_line) : on_line_(on_line) {}

  void Feed(const char* data, size_t size) {
    for (size_t i = 0; i < size; ++i) {
      char c = data[i];
      if (c == '\n' && after_cr_) {  // the '\n' of "\r\n": the line was already delivered
        after_cr_ = false;
        continue;
      }
      after_cr_ = false;
      if (c == '\n' || c == '\r') {
        after_cr_ = (c == '\r');
        Deliver();
        continue;
      }
      partial_ += c;
      if (partial_.size() >= kMaxLineBytes) Deliver();
    }
  }

  // At EOF: a last line without a newline still counts.
  void Finish() {
    if (!partial_.empty()) Deliver();
  }

 private:
  void Deliver() {
    if (on_line_) on_line_(partial_);
    partial_.clear();
  }

  const LineCallback& on_line_;
  std::string partial_;
  bool after_cr_ = false;
};

std::string EndingText(const ProcessResult& r, double timeout_seconds) {
  switch (r.ending) {
    case ProcessResult::Ending::kExited:
      return fmt::format("exit code {} after {:.2f} s", r.exit_code, r.seconds);
    case ProcessResult::Ending::kSignaled:
      return fmt::format("killed by signal {} after {:.2f} s", r.signal, r.seconds);
    case ProcessResult::Ending::kTimedOut:
      return fmt::format("timed out after {:g} s (ran {:.2f} s); process group killed",
                         timeout_seconds, r.seconds);
    case ProcessResult::Ending::kStopped:
      return fmt::format("stopped by request after {:.2f} s; process group killed", r.seconds);
    case ProcessResult::Ending::kFailedToStart:
      return "failed to start: " + r.error;
  }
  return "";
}

class SystemProcessRunner : public ProcessRunner {
 public:
  ProcessResult Run(const ProcessSpec& spec, const StopFlag& stop,
                    const LineCallback& on_line) override {
    ProcessResult result;
    const double start = Now();

    // The log: opened before anything runs, so even a failure to start is recorded.
    Fd log;
    if (!spec.log_path.empty()) {
      std::error_code ec;
      std::filesystem::path parent = std::filesystem::path(spec.log_path).parent_path();
      if (!parent.empty()) std::filesystem::create_directories(parent, ec);
      log.Reset(::open(spec.log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
      if (!log.valid()) {
        result.error = fmt::format("cannot open log '{}': {}", spec.log_path, std::strerror(errno));
        return result;
      }
    }
    std::string header = "$ " + QuoteCommand(spec.argv) + "\n# started " +
                         SystemClock().NowIso8601();
    if (!spec.workdir.empty()) header += " in " + spec.workdir;
    // Names only: env values may be secrets (tokens) and logs get shared.
    if (!spec.env.empty()) {
      header += " with env";
      for (const auto& entry : spec.env) header += " " + entry.first;
    }
    WriteAll(log.get(), header + "\n");

    auto fail = [&](std::string error) {
      result.ending = ProcessResult::Ending::kFailedToStart;
      result.error = std::move(error);
      result.seconds = Now() - start;
      WriteAll(log.get(), EndingText(result, spec.timeout_seconds) + "\n");
      return result;
    };

    if (spec.argv.empty() || spec.argv[0].empty()) return fail("empty command line");

    // Everything the child needs is built before fork: after fork it may only
    // make async-signal-safe calls.
    std::vector<char*> argv;
    for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    std::vector<std::string> env_strings;
    for (char** e = environ; e && *e; ++e) {
      std::string entry = *e;
      std::string key = entry.substr(0, entry.find('='));
      if (spec.env.count(key) == 0) env_strings.push_back(std::move(entry));
    }
    for (const auto& [key, value] : spec.env) env_strings.push_back(key + "=" + value);
    std::vector<char*> envp;
    for (auto& entry : env_strings) envp.push_back(entry.data());
    envp.push_back(nullptr);
    const char* workdir = spec.workdir.empty() ? nullptr : spec.workdir.c_str();

    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0)
      return fail(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
    if (::pipe2(err_pipe, O_CLOEXEC) != 0)
      return fail(fmt::format("cannot create a pipe: {}", std::strerror(errno)));
    Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
    Fd dev_null(::open("/dev/null", O_RDONLY | O_CLOEXEC));

    const pid_t parent = ::getpid();
    pid_t pid = ::fork();
    if (pid < 0) return fail(fmt::format("cannot fork: {}", std::strerror(errno)));
    if (pid == 0) {
      ::setpgid(0, 0);
      // The runner killed (kill -9) kills the command too: no launch left
      // running beside a --resume. (The runner already gone: do not start.)
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
      // Dispositions and the mask are inherited across exec; start the child clean.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD})
        ::signal(sig, SIG_DFL);
      if (dev_null.valid()) ::dup2(dev_null.get(), 0);
      ::dup2(out_write.get(), 1);
      ::dup2(out_write.get(), 2);
      ChildError failure{0, 0};
      if (workdir && ::chdir(workdir) != 0) {
        failure = {kStageChdir, errno};
      } else {
        ::execvpe(argv[0], argv.data(), envp.data());
        failure = {kStageExec, errno};
      }
      ssize_t ignored = ::write(err_write.get(), &failure, sizeof failure);
      (void)ignored;
      ::_exit(127);
    }

    ::setpgid(pid, pid);  // also done by the child; whichever runs first wins, both agree
    const pid_t pgid = pid;
    out_write.Close();
    err_write.Close();
    dev_null.Close();

    // EOF on the error pipe means exec succeeded (CLOEXEC closed it).
    ChildError failure{0, 0};
    ssize_t got;
    do {
      got = ::read(err_read.get(), &failure, sizeof failure);
    } while (got < 0 && errno == EINTR);
    if (got == static_cast<ssize_t>(sizeof failure)) {
      int status = 0;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (failure.stage == kStageChdir)
        return fail(fmt::format("cannot change directory to '{}': {}", spec.workdir,
                                std::strerror(failure.error)));
      return fail(fmt::format("cannot run '{}': {}", spec.argv[0], std::strerror(failure.error)));
    }
    err_read.Close();

    // The watch loop.
    LineSplitter lines(on_line);
    enum class Phase { kRunning, kTerminating, kKilled } phase = Phase::kRunning;
    bool ours = false;  // the ending is ours (timeout / stop), not the child's
    double kill_at = 0;         // kTerminating: when SIGTERM turns into SIGKILL
    double orphan_until = -1;   // after the child exited: end of the grace for grandchildren
    double give_up_at = 0;      // kKilled: stop waiting for EOF
    bool exited = false;
    double exited_at = 0;
    char buffer[65536];
    bool log_at_line_start = true;  // so the footer starts a line of its own

    auto kill_group = [&](double now) {
      ::kill(-pgid, SIGKILL);
      phase = Phase::kKilled;
      give_up_at = now + kAfterKillSeconds;
    };

    while (true) {
      if (out_read.valid()) {
        pollfd p{out_read.get(), POLLIN, 0};
        int ready = ::poll(&p, 1, kPollMilliseconds);
        if (ready > 0) {
          ssize_t n = ::read(out_read.get(), buffer, sizeof buffer);
          if (n > 0) {
            WriteAll(log.get(), buffer, static_cast<size_t>(n));
            log_at_line_start = buffer[n - 1] == '\n';
            lines.Feed(buffer, static_cast<size_t>(n));
          } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
            out_read.Close();  // EOF: every writer is gone
          }
        }
      } else {
        ::poll(nullptr, 0, kPollMilliseconds);
      }

      const double now = Now();
      if (!exited) {
        siginfo_t info;
        std::memset(&info, 0, sizeof info);
        int rc = ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT);
        // ECHILD: someone else reaped it (SIGCHLD ignored?); it is gone all the same.
        if ((rc == 0 && info.si_pid == pid) || (rc != 0 && errno == ECHILD)) {
          exited = true;
          exited_at = now;
        }
      }

      if (phase == Phase::kRunning && !exited) {
        if (stop.requested()) {
          result.ending = ProcessResult::Ending::kStopped;
        } else if (spec.timeout_seconds > 0 && now - start >= spec.timeout_seconds) {
          result.ending = ProcessResult::Ending::kTimedOut;
        }
        if (result.ending == ProcessResult::Ending::kStopped ||
            result.ending == ProcessResult::Ending::kTimedOut) {
          ours = true;
          ::kill(-pgid, SIGTERM);
          phase = Phase::kTerminating;
          kill_at = now + spec.kill_grace_seconds;
        }
      }
      if (phase == Phase::kTerminating && now >= kill_at) kill_group(now);

      if (exited) {
        if (!out_read.valid()) break;
        if (phase != Phase::kKilled) {
          if (orphan_until < 0) orphan_until = now + kOrphanGraceSeconds;
          if (now >= orphan_until) kill_group(now);
        } else if (now >= give_up_at) {
          out_read.Close();  // something escaped the group and holds the pipe
          break;
        }
      }
    }
    lines.Finish();

    // Always: nothing of the group outlives the run. The child is still a
    // zombie here, so pgid still names our group.
    ::kill(-pgid, SIGKILL);
    int status = 0;
    int reaped;
    while ((reaped = ::waitpid(pid, &status, 0)) < 0 && errno == EINTR) {
    }
    result.seconds = exited_at - start;
    if (reaped != pid) {  // never report an exit code we did not see
      result.ending = ProcessResult::Ending::kFailedToStart;
      result.error = fmt::format("lost track of '{}': its exit status was taken by someone else",
                                 spec.argv[0]);
      WriteAll(log.get(), (log_at_line_start ? "" : "\n") + result.error + "\n");
      return result;
    }
    if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) result.signal = WTERMSIG(status);
    if (!ours) {
      result.ending = WIFEXITED(status) ? ProcessResult::Ending::kExited
                                        : ProcessResult::Ending::kSignaled;
    }
    WriteAll(log.get(), (log_at_line_start ? "" : "\n") + EndingText(result, spec.timeout_seconds) + "\n");
    return result;
  }
};

}  // namespace

std::unique_ptr<ProcessRunner> MakeSystemProcessRunner() {
  return std::make_unique<SystemProcessRunner>();
}

bool IsLiveProtocolRun(int64_t pid) {
  if (pid <= 0 || ::kill(static_cast<pid_t>(pid), 0) != 0) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cmdline");
  std::string cmdline((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  for (size_t start = 0, end; start < cmdline.size(); start = end + 1) {
    end = cmdline.find('\0', start);
    if (end == std::string::npos) end = cmdline.size();
    argv.push_back(cmdline.substr(start, end - start));
  }
  if (argv.size() < 2 || argv[1] != "run") return false;
  const std::string program = argv[0].substr(argv[0].rfind('/') == std::string::npos ? 0 : argv[0].rfind('/') + 1);
  return program.rfind("protocol", 0) == 0;
}

}  // namespace protocol
