// The system ProcessRunner: every child is started through a guardian in a
// fresh process group, output is captured through one pipe per child, polled
// so that a deadline or a stop request is noticed within kPollMilliseconds.
// Run is a group of one child with a log header and footer; RunGroup runs
// many children to their common end (process.h GroupResult).
//
// Lifecycle of one group:
//   1. open the log (parent directories created); Run writes its header line;
//   2. one lifeline pipe for the group: the runner keeps its write end (close-
//      on-exec) until every child has been reaped;
//   3. per child, fork the guardian (Guard below): it makes a new process
//      group (setpgid(0,0), also done by the parent so neither order races),
//      points stdin at /dev/null (or, for a group with a relay, at a socket
//      whose other end the runner holds) and stdout and stderr at the child's pipe,
//      and forks the command into its group; the command resets signal
//      dispositions and the mask, chdirs to the workdir and execs (PATH
//      search, no shell). A fork, chdir or exec failure travels back through a
//      CLOEXEC error pipe, so "it ran and failed" and "it never ran" stay
//      distinct. The guardian closes every descriptor but the lifeline's read
//      end and waits (ppoll, SIGCHLD unblocked only there) for either the
//      command's end, which it relays (same exit code, or the same signal
//      raised on itself), or the lifeline's end-of-file (the runner died), on
//      which it SIGKILLs its whole group, grandchildren included. It ignores
//      SIGTERM, so a SIGTERM to the group reaches the command, whose end it
//      then relays; the runner's SIGKILL to the group ends both;
//   4. the runner polls every pipe, writes the output to the log, splits it
//      into lines for the callback (and the relay, which may answer on the
//      other children's standard input), and watches the children's ends, the
//      deadline and the StopFlag; a decided end (a child failed, timeout,
//      stop) sends SIGTERM to the groups of the children still running, then
//      SIGKILL after kill_grace_seconds;
//   5. a child's end is noticed with waitid(WNOWAIT), which leaves it a
//      zombie: its pid, and so its process group id, cannot be reused while we
//      still signal the group. Grandchildren that keep a pipe open get
//      kOrphanGraceSeconds to finish writing, then every group is SIGKILLed —
//      always, so nothing is left behind — and only then are children reaped;
//   6. Run's footer line ("exit code 3 after 1.23 s") closes its log entry.
//
// Lines: '\n' ends a line, and so does a lone '\r' (progress bars redraw with
// '\r'); "\r\n" is one line end. A line longer than kMaxLineBytes is
// delivered in pieces. A final partial line is delivered at EOF. Run's log
// gets the output byte for byte; RunGroup's log gets it line by line, each
// line after its child's log_prefix.
//
// Between fork and exec only async-signal-safe calls are made (the runner is
// multi-threaded): everything the guardian and the command need is built
// before the fork.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
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

// What the child writes to the error pipe before _exit when it cannot exec.
struct ChildError {
  int stage;  // kStageChdir | kStageExec | kStageFork
  int error;  // errno
};
constexpr int kStageChdir = 1;
constexpr int kStageExec = 2;
constexpr int kStageFork = 3;

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
  int Release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  void Close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_;
};

// Writes all of `data` to `fd`; returns 0, or the errno of the write that
// failed and adds the bytes not written to `*unwritten`.
int WriteAll(int fd, const char* data, size_t size, uint64_t* unwritten) {
  if (fd < 0) return 0;
  while (size > 0) {
    ssize_t n = ::write(fd, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      *unwritten += size;
      return errno;
    }
    data += n;
    size -= static_cast<size_t>(n);
  }
  return 0;
}

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
  explicit LineSplitter(LineCallback on_line) : on_line_(std::move(on_line)) {}

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

  // At EOF: a last line without a newline still counts. Returns whether there
  // was one (the output ended in the middle of a line).
  bool Finish() {
    if (partial_.empty()) return false;
    Deliver();
    return true;
  }

 private:
  void Deliver() {
    if (on_line_) on_line_(partial_);
    partial_.clear();
  }

  LineCallback on_line_;
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

// ---- before the fork: what the guardian and the command need ------------------------------

// A child's command line and environment as exec wants them. Built before the
// fork; not copyable (argv and envp point into it).
struct PreparedCommand {
  explicit PreparedCommand(const ProcessSpec& spec) {
    for (const auto& arg : spec.argv) argv.push_back(const_cast<char*>(arg.c_str()));
    argv.push_back(nullptr);
    for (char** e = environ; e && *e; ++e) {
      std::string entry = *e;
      if (spec.env.count(entry.substr(0, entry.find('='))) == 0) env_strings.push_back(std::move(entry));
    }
    for (const auto& [key, value] : spec.env) env_strings.push_back(key + "=" + value);
    for (auto& entry : env_strings) envp.push_back(entry.data());
    envp.push_back(nullptr);
    if (!spec.workdir.empty()) workdir = spec.workdir.c_str();
  }
  PreparedCommand(const PreparedCommand&) = delete;
  PreparedCommand& operator=(const PreparedCommand&) = delete;

  std::vector<char*> argv;
  std::vector<std::string> env_strings;
  std::vector<char*> envp;
  const char* workdir = nullptr;
};

// The descriptors a guardian is forked with.
struct GuardianFds {
  int input;           // becomes the command's stdin: /dev/null or the relay's socket (-1: none)
  int out_write;       // becomes the command's stdout and stderr
  int error_write;     // a ChildError when the command cannot be started
  int lifeline_read;   // end-of-file: the runner is gone
  int lifeline_write;  // the runner's; closed at once in the guardian
};

// ---- after the fork: async-signal-safe calls only ----------------------------------------

// The guardian's SIGCHLD handler: it only has to interrupt ppoll.
void OnCommandEnded(int) {}

// Closes descriptors first..last (inclusive), skipping nothing.
void CloseRange(unsigned first, unsigned last) {
  if (first > last) return;
#ifdef SYS_close_range
  if (::syscall(SYS_close_range, first, last, 0) == 0) return;
#endif
  rlimit limit;
  unsigned top = 65536;  // a bound on the fallback loop
  if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < top) top = static_cast<unsigned>(limit.rlim_cur);
  for (unsigned fd = first; fd <= last && fd < top; ++fd) ::close(static_cast<int>(fd));
}

// Every descriptor but `keep` closed (pipes of other children included, so
// that their ends are not held open by a process that never execs).
void CloseAllBut(int keep) {
  if (keep > 0) CloseRange(0, static_cast<unsigned>(keep) - 1);
  CloseRange(static_cast<unsigned>(keep) + 1, ~0U);
}

// In the command's process: clean signal state, workdir, exec. Never returns.
[[noreturn]] void ExecCommand(const PreparedCommand& command, int error_write) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the guardian gone: so is the command
  // Dispositions and the mask are inherited across exec; start the command clean.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
  ChildError failure{0, 0};
  if (command.workdir && ::chdir(command.workdir) != 0) {
    failure = {kStageChdir, errno};
  } else {
    ::execvpe(command.argv[0], command.argv.data(), const_cast<char* const*>(command.envp.data()));
    failure = {kStageExec, errno};
  }
  ssize_t ignored = ::write(error_write, &failure, sizeof failure);
  (void)ignored;
  ::_exit(127);
}

// The guardian ends as the command ended: the same exit code, or the same
// signal raised on itself (without a second core dump).
[[noreturn]] void RelayEnd(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    rlimit no_core{0, 0};
    ::setrlimit(RLIMIT_CORE, &no_core);
    ::signal(sig, SIG_DFL);
    sigset_t only;
    sigemptyset(&only);
    sigaddset(&only, sig);
    ::sigprocmask(SIG_UNBLOCK, &only, nullptr);
    ::kill(::getpid(), sig);
    ::_exit(128 + sig);  // a signal whose default is not to end a process
  }
  ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : 127);
}

// The guardian (see the file comment): leads the child's process group, forks
// the command into it, relays its end, and SIGKILLs the group when the
// lifeline reads end-of-file. Never returns.
[[noreturn]] void Guard(const PreparedCommand& command, const GuardianFds& fds, pid_t runner) {
  ::setpgid(0, 0);
  ::close(fds.lifeline_write);  // only the runner holds it
  // A SIGTERM (or Ctrl-C) to the group is the command's to act on; the guardian waits for its end.
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGPIPE}) ::signal(sig, SIG_IGN);
  struct sigaction on_child;
  std::memset(&on_child, 0, sizeof on_child);
  on_child.sa_handler = OnCommandEnded;
  sigemptyset(&on_child.sa_mask);
  ::sigaction(SIGCHLD, &on_child, nullptr);
  sigset_t child_only;  // SIGCHLD blocked except inside ppoll: no end is missed
  sigemptyset(&child_only);
  sigaddset(&child_only, SIGCHLD);
  ::sigprocmask(SIG_SETMASK, &child_only, nullptr);
  if (::getppid() != runner) ::_exit(127);  // the runner already gone: start nothing
  if (fds.input >= 0) ::dup2(fds.input, 0);
  ::dup2(fds.out_write, 1);
  ::dup2(fds.out_write, 2);
  const pid_t pid = ::fork();
  if (pid == 0) ExecCommand(command, fds.error_write);
  if (pid < 0) {
    ChildError failure{kStageFork, errno};
    ssize_t ignored = ::write(fds.error_write, &failure, sizeof failure);
    (void)ignored;
    ::_exit(127);
  }
  CloseAllBut(fds.lifeline_read);
  sigset_t waiting;
  sigemptyset(&waiting);
  while (true) {
    int status = 0;
    const pid_t ended = ::waitpid(pid, &status, WNOHANG);
    if (ended == pid) RelayEnd(status);
    if (ended < 0 && errno != EINTR) ::_exit(127);
    pollfd lifeline{fds.lifeline_read, POLLIN, 0};
    if (::ppoll(&lifeline, 1, nullptr, &waiting) > 0) {
      ::kill(0, SIGKILL);  // the runner is gone (the runner never writes): the whole group goes
      ::_exit(128 + SIGKILL);
    }
  }
}

// ---- the runner's side -----------------------------------------------------------------------

// Opens (appending, parent directories created) the log at `path` into `log`;
// returns the error text, "" on success or when `path` is empty.
std::string OpenLog(const std::string& path, Fd& log) {
  if (path.empty()) return "";
  std::error_code ec;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);
  log.Reset(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
  if (!log.valid()) return fmt::format("cannot open log '{}': {}", path, std::strerror(errno));
  return "";
}

// Where a group's output goes besides the callback. A write that fails
// (a full disk) loses that text, never the run: the loss is counted and
// reported in the result's log_error.
struct GroupLog {
  std::string path;
  int fd = -1;                // -1: nowhere
  bool raw = false;           // Run: bytes as they come; RunGroup: line by line after the child's prefix
  std::function<bool(std::string_view line)> keep;  // line mode: a line it refuses is not logged
  bool at_line_start = true;  // raw mode: whether the last byte written ended a line
  int error = 0;              // errno of the first write that failed
  uint64_t unwritten = 0;     // bytes lost to failed writes

  void Write(const char* data, size_t size) {
    const int e = WriteAll(fd, data, size, &unwritten);
    if (e != 0 && error == 0) error = e;
  }
  void Write(const std::string& text) { Write(text.data(), text.size()); }
  // ProcessResult::log_error's text; "" when everything was written.
  std::string ErrorText() const { return error == 0 ? "" : LogWriteError(path, error, unwritten); }
};

// One child of a group, from its start to its reaping.
struct Child {
  const ProcessSpec* spec = nullptr;
  pid_t pid = -1;          // its guardian: the leader of its process group
  Fd out;                  // read end of its output pipe; closed at EOF
  Fd in;                   // the runner's end of its stdin socket (a group with a relay); closed at the end
  std::unique_ptr<LineSplitter> lines;
  bool exited = false;     // waitid saw it end (a zombie until reaped)
  double exited_at = 0;
  ProcessResult result;
};

// Forks the guardian of `child` (its pid and output pipe are set on success,
// and with `with_input` the runner's end of its stdin socket); returns the
// error text when the command could not be started.
std::string Launch(Child& child, int lifeline_read, int lifeline_write, bool with_input) {
  const ProcessSpec& spec = *child.spec;
  if (spec.argv.empty() || spec.argv[0].empty()) return "empty command line";
  const PreparedCommand command(spec);
  int out_pipe[2];
  int err_pipe[2];
  if (::pipe2(out_pipe, O_CLOEXEC) != 0) return fmt::format("cannot create a pipe: {}", std::strerror(errno));
  Fd out_read(out_pipe[0]), out_write(out_pipe[1]);
  if (::pipe2(err_pipe, O_CLOEXEC) != 0) return fmt::format("cannot create a pipe: {}", std::strerror(errno));
  Fd err_read(err_pipe[0]), err_write(err_pipe[1]);
  Fd input, input_ours;
  if (with_input) {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
      return fmt::format("cannot create a socket pair: {}", std::strerror(errno));
    input_ours.Reset(sv[0]);
    input.Reset(sv[1]);
  } else {
    input.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
  const GuardianFds fds{input.get(), out_write.get(), err_write.get(), lifeline_read, lifeline_write};

  const pid_t runner = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return fmt::format("cannot fork: {}", std::strerror(errno));
  if (pid == 0) Guard(command, fds, runner);
  ::setpgid(pid, pid);  // also done by the guardian; whichever runs first wins, both agree
  out_write.Close();
  err_write.Close();
  input.Close();

  // EOF on the error pipe means the command was exec'd (CLOEXEC closed it).
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
      return fmt::format("cannot change directory to '{}': {}", spec.workdir, std::strerror(failure.error));
    if (failure.stage == kStageFork) return fmt::format("cannot fork: {}", std::strerror(failure.error));
    return fmt::format("cannot run '{}': {}", spec.argv[0], std::strerror(failure.error));
  }
  child.pid = pid;
  child.out.Reset(out_read.Release());
  child.in.Reset(input_ours.Release());
  return "";
}

// Runs a group of children to their common end (process.h GroupResult).
class GroupRun {
 public:
  GroupRun(const std::vector<ProcessSpec>& specs, double timeout_seconds, double kill_grace_seconds,
           const StopFlag& stop, GroupLog log, GroupLineCallback on_line,
           std::function<std::string(size_t, std::string_view)> relay = nullptr)
      : children_(specs.size()),
        timeout_seconds_(timeout_seconds),
        kill_grace_seconds_(kill_grace_seconds),
        stop_(stop),
        log_(std::move(log)),
        on_line_(std::move(on_line)),
        relay_(std::move(relay)) {
    for (size_t i = 0; i < specs.size(); ++i) {
      children_[i].spec = &specs[i];
      children_[i].lines = std::make_unique<LineSplitter>([this, i](std::string_view line) { OnLine(i, line); });
    }
  }

  GroupResult Run() {
    start_ = SteadySeconds();
    StartAll();
    if (AnyRunning()) Watch();
    Reap();
    lifeline_write_.Close();
    result_.seconds = SteadySeconds() - start_;
    return std::move(result_);
  }

  GroupLog& log() { return log_; }

 private:
  enum class Phase { kRunning, kTerminating, kKilled };

  void StartAll() {
    int lifeline[2];
    if (::pipe2(lifeline, O_CLOEXEC) != 0) {
      if (!children_.empty()) FailToStart(0, fmt::format("cannot create a pipe: {}", std::strerror(errno)));
      return;
    }
    lifeline_write_.Reset(lifeline[1]);
    Fd lifeline_read(lifeline[0]);  // the guardians hold it; the runner needs no copy
    for (size_t i = 0; i < children_.size(); ++i) {
      std::string error = Launch(children_[i], lifeline_read.get(), lifeline_write_.get(), relay_ != nullptr);
      if (!error.empty()) {
        FailToStart(i, std::move(error));
        return;
      }
    }
  }

  // Child `index` could not be started: those before it are stopped, those after it never start.
  void FailToStart(size_t index, std::string error) {
    const double now = SteadySeconds();
    children_[index].result.error = std::move(error);
    children_[index].result.seconds = now - start_;
    for (size_t j = index + 1; j < children_.size(); ++j) children_[j].result.error = "not started";
    Decide(GroupResult::Outcome::kFailedToStart, static_cast<int>(index), now);
  }

  void OnLine(size_t index, std::string_view line) {
    if (log_.fd >= 0 && !log_.raw && (!log_.keep || log_.keep(line)))
      log_.Write(children_[index].spec->log_prefix + std::string(line) + "\n");
    if (on_line_) on_line_(index, line);
    if (relay_) Relay(index, relay_(index, line));
  }

  // `text` and a newline to every other child still running: one non-blocking
  // write each (a line far below the socket's buffer), no SIGPIPE.
  void Relay(size_t from, const std::string& text) {
    if (text.empty()) return;
    const std::string line = text + "\n";
    for (size_t j = 0; j < children_.size(); ++j) {
      Child& c = children_[j];
      if (j == from || !c.in.valid() || c.exited) continue;
      ssize_t sent;
      do {
        sent = ::send(c.in.get(), line.data(), line.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      } while (sent < 0 && errno == EINTR);
    }
  }

  // One poll over every open pipe: output to the log and the line splitters.
  void PollOutput() {
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    for (Child& c : children_)
      if (c.out.valid()) {
        fds.push_back({c.out.get(), POLLIN, 0});
        owners.push_back(&c);
      }
    if (fds.empty()) {
      ::poll(nullptr, 0, kPollMilliseconds);
      return;
    }
    if (::poll(fds.data(), fds.size(), kPollMilliseconds) <= 0) return;
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      Child& c = *owners[i];
      const ssize_t n = ::read(c.out.get(), buffer_, sizeof buffer_);
      if (n > 0) {
        if (log_.raw && log_.fd >= 0) {
          log_.Write(buffer_, static_cast<size_t>(n));
          log_.at_line_start = buffer_[n - 1] == '\n';
        }
        c.lines->Feed(buffer_, static_cast<size_t>(n));
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        c.out.Close();  // EOF: every writer is gone
        if (c.lines->Finish()) c.result.ended_mid_line = true;
      }
    }
  }

  // Marks the children that ended since the last look; returns the one that
  // failed (a killed one before one that exited non-zero), -1 when none did.
  int NoticeEndings(double now) {
    int killed = -1, exited_bad = -1;
    for (size_t i = 0; i < children_.size(); ++i) {
      Child& c = children_[i];
      if (c.pid <= 0 || c.exited) continue;
      siginfo_t info;
      std::memset(&info, 0, sizeof info);
      const int rc = ::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT);
      // ECHILD: someone else reaped it (SIGCHLD ignored?); it is gone all the same.
      if (!((rc == 0 && info.si_pid == c.pid) || (rc != 0 && errno == ECHILD))) continue;
      c.exited = true;
      c.exited_at = now;
      if (rc != 0) continue;
      if (info.si_code != CLD_EXITED) {
        if (killed < 0) killed = static_cast<int>(i);
      } else if (info.si_status != 0 && exited_bad < 0) {
        exited_bad = static_cast<int>(i);
      }
    }
    return killed >= 0 ? killed : exited_bad;
  }

  // The group's end is decided: SIGTERM to every child still running, SIGKILL after the grace.
  void Decide(GroupResult::Outcome outcome, int first_failed, double now) {
    decided_ = true;
    result_.outcome = outcome;
    result_.first_failed = first_failed;
    bool signaled = false;
    for (Child& c : children_)
      if (c.pid > 0 && !c.exited) {
        ::kill(-c.pid, SIGTERM);
        signaled = true;
      }
    if (signaled) {
      phase_ = Phase::kTerminating;
      kill_at_ = now + kill_grace_seconds_;
    }
  }

  void KillAll(double now) {
    for (Child& c : children_)
      if (c.pid > 0) ::kill(-c.pid, SIGKILL);
    phase_ = Phase::kKilled;
    give_up_at_ = now + kAfterKillSeconds;
  }

  bool AnyRunning() const {
    for (const Child& c : children_)
      if (c.pid > 0 && !c.exited) return true;
    return false;
  }

  bool AllClosed() const {
    for (const Child& c : children_)
      if (c.out.valid()) return false;
    return true;
  }

  // The poll loop: output, ends, the decision, the kill, the grace for grandchildren.
  void Watch() {
    while (true) {
      PollOutput();
      const double now = SteadySeconds();
      const int failed = NoticeEndings(now);
      if (!decided_) {
        if (failed >= 0) {
          Decide(GroupResult::Outcome::kChildFailed, failed, now);
        } else if (AnyRunning() && stop_.requested()) {
          Decide(GroupResult::Outcome::kStopped, -1, now);
        } else if (AnyRunning() && timeout_seconds_ > 0 && now - start_ >= timeout_seconds_) {
          Decide(GroupResult::Outcome::kTimedOut, -1, now);
        }
      }
      if (phase_ == Phase::kTerminating && now >= kill_at_) KillAll(now);
      if (AnyRunning()) continue;
      if (AllClosed()) break;
      if (phase_ != Phase::kKilled) {
        if (orphan_until_ < 0) orphan_until_ = now + kOrphanGraceSeconds;
        if (now >= orphan_until_) KillAll(now);
      } else if (now >= give_up_at_) {
        break;  // something escaped the groups and holds a pipe
      }
    }
    for (Child& c : children_) {
      if (c.lines->Finish()) c.result.ended_mid_line = true;
      c.out.Close();
      c.in.Close();
    }
  }

  // Always: every group SIGKILLed (each leader is still a zombie, so its pid
  // still names its group), then every child reaped.
  void Reap() {
    for (Child& c : children_) {
      if (c.pid <= 0) {
        c.result.ending = ProcessResult::Ending::kFailedToStart;
        result_.children.push_back(c.result);
        continue;
      }
      ::kill(-c.pid, SIGKILL);
      int status = 0;
      pid_t reaped;
      while ((reaped = ::waitpid(c.pid, &status, 0)) < 0 && errno == EINTR) {
      }
      c.result.pid = c.pid;
      c.result.seconds = (c.exited ? c.exited_at : SteadySeconds()) - start_;
      if (reaped != c.pid) {  // never report an exit code we did not see
        c.result.ending = ProcessResult::Ending::kFailedToStart;
        c.result.error = fmt::format("lost track of '{}': its exit status was taken by someone else",
                                     c.spec->argv[0]);
      } else if (WIFEXITED(status)) {
        c.result.ending = ProcessResult::Ending::kExited;
        c.result.exit_code = WEXITSTATUS(status);
      } else {
        c.result.ending = ProcessResult::Ending::kSignaled;
        c.result.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
      }
      result_.children.push_back(c.result);
    }
    if (result_.outcome == GroupResult::Outcome::kOk) {
      for (size_t i = 0; i < result_.children.size(); ++i) {
        const ProcessResult& r = result_.children[i];
        if (r.ending != ProcessResult::Ending::kExited || r.exit_code != 0) {
          result_.outcome = GroupResult::Outcome::kChildFailed;  // e.g. an end only the reaping saw
          result_.first_failed = static_cast<int>(i);
          break;
        }
      }
    }
  }

  std::vector<Child> children_;
  const double timeout_seconds_;
  const double kill_grace_seconds_;
  const StopFlag& stop_;
  GroupLog log_;
  GroupLineCallback on_line_;
  std::function<std::string(size_t, std::string_view)> relay_;
  Fd lifeline_write_;
  GroupResult result_;
  double start_ = 0;
  bool decided_ = false;
  Phase phase_ = Phase::kRunning;
  double kill_at_ = 0;        // kTerminating: when SIGTERM turns into SIGKILL
  double orphan_until_ = -1;  // every child ended: end of the grace for grandchildren
  double give_up_at_ = 0;     // kKilled: stop waiting for EOF
  char buffer_[65536];
};

// "$ prog args\n# started <time> in <workdir> with env K1 K2" (names only:
// env values may be secrets, and logs get shared).
std::string LogHeader(const ProcessSpec& spec) {
  std::string header = "$ " + QuoteCommand(spec.argv) + "\n# started " + SystemClock().NowIso8601();
  if (!spec.workdir.empty()) header += " in " + spec.workdir;
  if (!spec.env.empty()) {
    header += " with env";
    for (const auto& entry : spec.env) header += " " + entry.first;
  }
  return header;
}

class SystemProcessRunner : public ProcessRunner {
 public:
  ProcessResult Run(const ProcessSpec& spec, const StopFlag& stop, const LineCallback& on_line) override {
    Fd log;
    if (std::string error = OpenLog(spec.log_path, log); !error.empty()) {
      ProcessResult result;
      result.error = std::move(error);
      return result;
    }
    const std::vector<ProcessSpec> one{spec};
    GroupLog group_log;
    group_log.path = spec.log_path;
    group_log.fd = log.get();
    group_log.Write(LogHeader(spec) + "\n");
    group_log.raw = true;
    GroupRun group(one, spec.timeout_seconds, spec.kill_grace_seconds, stop, std::move(group_log),
                   [&on_line](size_t, std::string_view line) {
                     if (on_line) on_line(line);
                   });
    const GroupResult ended = group.Run();
    ProcessResult result = ended.children.at(0);
    if (ended.outcome == GroupResult::Outcome::kTimedOut) result.ending = ProcessResult::Ending::kTimedOut;
    if (ended.outcome == GroupResult::Outcome::kStopped) result.ending = ProcessResult::Ending::kStopped;
    // A child that ran but whose end was lost says so plainly, not "failed to start".
    const bool lost = result.ending == ProcessResult::Ending::kFailedToStart && result.pid > 0;
    GroupLog& ended_log = group.log();
    ended_log.Write((ended_log.at_line_start ? "" : "\n") +
                    (lost ? result.error : EndingText(result, spec.timeout_seconds)) + "\n");
    result.log_error = ended_log.ErrorText();
    return result;
  }

  GroupResult RunGroup(const std::vector<ProcessSpec>& children, const GroupOptions& options, const StopFlag& stop,
                       const GroupLineCallback& on_line) override {
    Fd log;
    if (std::string error = OpenLog(options.log_path, log); !error.empty()) {
      GroupResult result;
      for (size_t i = 0; i < children.size(); ++i) {
        ProcessResult r;
        r.error = i == 0 ? error : "not started";
        result.children.push_back(r);
      }
      if (!children.empty()) {
        result.outcome = GroupResult::Outcome::kFailedToStart;
        result.first_failed = 0;
      }
      return result;
    }
    GroupLog group_log;
    group_log.path = options.log_path;
    group_log.fd = log.get();
    group_log.keep = options.keep_in_log;
    GroupRun group(children, options.timeout_seconds, options.kill_grace_seconds, stop, std::move(group_log),
                   on_line, options.relay);
    GroupResult result = group.Run();
    result.log_error = group.log().ErrorText();
    return result;
  }
};

}  // namespace

std::string LogWriteError(const std::string& path, int error, uint64_t unwritten) {
  const std::string amount = unwritten < 1024 ? fmt::format("{} bytes", unwritten)
                                              : fmt::format("{:.1f} KiB", unwritten / 1024.0);
  return fmt::format("{}; {} of output not written", CannotWrite(path, error), amount);
}

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
