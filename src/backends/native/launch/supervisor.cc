#include "backends/native/launch/supervisor.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "runner/base/text.h"

extern char** environ;

namespace protocol {
namespace native {
namespace {

constexpr int kPollMilliseconds = 20;

double Now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}

struct Child {
  const RankLaunch* launch = nullptr;
  pid_t pid = -1;
  int fd = -1;            // read end of its output pipe; -1 after EOF
  std::string partial;    // an unfinished output line
  bool exited = false;    // waitid saw it end (still a zombie until reaped)
  bool reaped = false;
  int status = 0;
};

std::string Describe(const Child& c) {
  return fmt::format("rank {} (node {})", c.launch->rank, c.launch->node.empty() ? "?" : c.launch->node);
}

// fork + exec of one rank; returns the error text on failure.
std::string Start(Child& c, const std::string& workdir) {
  const RankLaunch& l = *c.launch;
  if (l.argv.empty()) return "empty command line";
  std::vector<char*> argv;
  for (const auto& a : l.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; e && *e; ++e) {
    std::string entry = *e;
    if (l.env.count(entry.substr(0, entry.find('='))) == 0) env_strings.push_back(std::move(entry));
  }
  for (const auto& [k, v] : l.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return fmt::format("cannot create a pipe: {}", std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) {
    ::close(out[0]);
    ::close(out[1]);
    return fmt::format("cannot fork: {}", std::strerror(errno));
  }
  if (pid == 0) {
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // the runner died (kill -9): so do the ranks
    if (::getppid() != parent) ::_exit(127);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGQUIT, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
    int null = ::open("/dev/null", O_RDONLY);
    if (null >= 0) ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    if (!workdir.empty() && ::chdir(workdir.c_str()) != 0) ::_exit(126);
    ::execvpe(argv[0], argv.data(), envp.data());
    const char msg[] = "protocol: cannot exec the rank's command\n";
    ssize_t ignored = ::write(2, msg, sizeof msg - 1);
    (void)ignored;
    ::_exit(127);
  }
  ::setpgid(pid, pid);
  ::close(out[1]);
  c.pid = pid;
  c.fd = out[0];
  return "";
}

}  // namespace

SuperviseResult Supervise(const std::vector<RankLaunch>& ranks, const SuperviseOptions& options, const StopFlag& stop,
                          const RankLineCallback& on_line) {
  SuperviseResult result;
  const double start = Now();
  std::ofstream log;
  if (!options.log_path.empty()) {
    std::error_code ec;
    auto parent = std::filesystem::path(options.log_path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    log.open(options.log_path, std::ios::app);
  }
  auto emit = [&](Child& c, const std::string& line) {
    if (log && (!options.keep_in_log || options.keep_in_log(line)))
      log << "[rank " << c.launch->rank << "] " << line << '\n' << std::flush;
    if (on_line) on_line(c.launch->rank, line);
  };

  std::vector<Child> children(ranks.size());
  for (size_t i = 0; i < ranks.size(); ++i) children[i].launch = &ranks[i];

  enum class Phase { kRunning, kTerminating, kKilled } phase = Phase::kRunning;
  double kill_at = 0;
  auto stop_all = [&](SuperviseResult::Outcome outcome, std::string reason) {
    if (phase != Phase::kRunning) return;
    result.outcome = outcome;
    result.reason = std::move(reason);
    for (Child& c : children)
      if (c.pid > 0 && !c.exited) ::kill(-c.pid, SIGTERM);
    phase = Phase::kTerminating;
    kill_at = Now() + options.kill_grace_seconds;
  };

  for (Child& c : children) {
    std::string error = Start(c, options.workdir);
    if (!error.empty()) {
      stop_all(SuperviseResult::Outcome::kFailedToStart, fmt::format("{} failed to start: {}", Describe(c), error));
      break;
    }
  }

  char buffer[65536];
  while (true) {
    // Output of every rank still writing.
    std::vector<pollfd> fds;
    std::vector<Child*> owners;
    for (Child& c : children)
      if (c.fd >= 0) {
        fds.push_back({c.fd, POLLIN, 0});
        owners.push_back(&c);
      }
    if (!fds.empty()) {
      int ready = ::poll(fds.data(), fds.size(), kPollMilliseconds);
      for (size_t i = 0; ready > 0 && i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        Child& c = *owners[i];
        ssize_t n = ::read(c.fd, buffer, sizeof buffer);
        if (n > 0) {
          for (ssize_t k = 0; k < n; ++k) {
            if (buffer[k] == '\n') {
              emit(c, c.partial);
              c.partial.clear();
            } else {
              c.partial += buffer[k];
            }
          }
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          ::close(c.fd);
          c.fd = -1;
          if (!c.partial.empty()) emit(c, c.partial);
          c.partial.clear();
        }
      }
    } else {
      ::poll(nullptr, 0, kPollMilliseconds);
    }

    // Endings (WNOWAIT: a zombie keeps its pid and group id from being reused).
    const double now = Now();
    // Ranks that ended since the last look. When several failed in one look, a
    // rank killed by a signal is named before one that exited non-zero: a
    // killed rank's peers exit with errors about the lost connection.
    const Child* killed = nullptr;
    const Child* exited_bad = nullptr;
    int killed_signal = 0, bad_code = 0;
    for (Child& c : children) {
      if (c.pid <= 0 || c.exited) continue;
      siginfo_t info;
      std::memset(&info, 0, sizeof info);
      if (::waitid(P_PID, static_cast<id_t>(c.pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == c.pid) {
        c.exited = true;
        if (info.si_code != CLD_EXITED && !killed) {
          killed = &c;
          killed_signal = info.si_status;
        } else if (info.si_code == CLD_EXITED && info.si_status != 0 && !exited_bad) {
          exited_bad = &c;
          bad_code = info.si_status;
        }
      }
    }
    if (phase == Phase::kRunning && killed) {
      result.failed_rank = killed->launch->rank;
      stop_all(SuperviseResult::Outcome::kRankFailed,
               fmt::format("{} was killed by signal {}", Describe(*killed), killed_signal));
    } else if (phase == Phase::kRunning && exited_bad) {
      result.failed_rank = exited_bad->launch->rank;
      stop_all(SuperviseResult::Outcome::kRankFailed, fmt::format("{} exited with code {}", Describe(*exited_bad), bad_code));
    }
    if (phase == Phase::kRunning) {
      if (stop.requested()) {
        stop_all(SuperviseResult::Outcome::kStopped, "stopped by request; every rank was stopped");
      } else if (options.timeout_seconds > 0 && now - start >= options.timeout_seconds) {
        stop_all(SuperviseResult::Outcome::kTimedOut,
                 fmt::format("exceeded the case's timeout of {:g} s; every rank was stopped", options.timeout_seconds));
      }
    }
    if (phase == Phase::kTerminating && now >= kill_at) {
      for (Child& c : children)
        if (c.pid > 0) ::kill(-c.pid, SIGKILL);
      phase = Phase::kKilled;
    }
    bool all_exited = true, all_closed = true;
    for (Child& c : children) {
      if (c.pid > 0 && !c.exited) all_exited = false;
      if (c.fd >= 0) all_closed = false;
    }
    if (all_exited) {
      if (all_closed) break;
      // A grandchild holds a pipe open: end its group (the ranks themselves are gone).
      for (Child& c : children)
        if (c.pid > 0) ::kill(-c.pid, SIGKILL);
      if (phase == Phase::kKilled) {
        for (Child& c : children)
          if (c.fd >= 0) {
            ::close(c.fd);
            c.fd = -1;
          }
        break;
      }
      phase = Phase::kKilled;
    }
  }

  // Always: every group killed, every rank reaped.
  for (Child& c : children) {
    RankEnd end;
    end.rank = c.launch->rank;
    end.node = c.launch->node;
    end.pid = c.pid;
    end.started = c.pid > 0;
    if (c.pid > 0) {
      ::kill(-c.pid, SIGKILL);
      int status = 0;
      while (::waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (WIFEXITED(status)) end.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) end.signal = WTERMSIG(status);
    }
    if (c.fd >= 0) ::close(c.fd);
    result.ranks.push_back(end);
  }
  result.seconds = Now() - start;
  if (log) log << fmt::format("# ranks ended after {:.2f} s: {}", result.seconds,
                              result.reason.empty() ? "all exited with code 0" : result.reason)
               << '\n';
  return result;
}

}  // namespace native
}  // namespace protocol
