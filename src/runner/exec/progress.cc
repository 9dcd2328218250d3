// Terminal progress on stderr (progress.h, terminal_progress.h).

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>

#include "runner/base/text.h"
#include "runner/exec/terminal_progress.h"

namespace protocol {
namespace {

constexpr double kPlainStatusInterval = 5.0;  // seconds between status lines in logs

class TerminalProgress : public Progress {
 public:
  TerminalProgress(std::function<void(const std::string&)> write, Clock& clock, bool tty)
      : write_(std::move(write)), clock_(clock), tty_(tty) {}

  void CaseStarted(int index, int total, const CaseSpec& spec, int repeat) override {
    total_ = total;
    case_start_ = clock_.NowSeconds();
    fraction_ = 0;
    last_status_ = -std::numeric_limits<double>::infinity();
    Line(fmt::format("[{}/{}] {} {} {} (repeat {}/{}) \u2026", index, total, spec.id,
                     WorkloadName(spec.workload), spec.backend, repeat + 1,
                     spec.repeats < 1 ? 1 : spec.repeats));
  }

  void CaseStatusLine(const std::string& text) override {
    double now = clock_.NowSeconds();
    double elapsed = now - case_start_;
    std::string line =
        fmt::format("  {} \u00b7 elapsed {} \u00b7 {}", text, FormatElapsed(elapsed), Eta(elapsed));
    if (tty_) {
      write_("\r\x1b[K" + line);
      open_ = true;
    } else if (now - last_status_ >= kPlainStatusInterval) {
      write_(line + "\n");
      last_status_ = now;
    }
  }

  void CaseFinished(int index, int total, const CaseSpec& spec, int repeat, CaseStatus status,
                    double seconds, const std::string& reason) override {
    ++finished_;
    finished_seconds_ += seconds;
    Line(fmt::format("[{}/{}] {} {} {:.1f} s{}", index, total, spec.id, CaseStatusName(status),
                     seconds, reason.empty() ? "" : ": " + reason));
  }

  void CaseFractionDone(double fraction) override { fraction_ = fraction; }

  void Message(const std::string& text) override { Line(text); }

 private:
  // terminal_progress.h: the running case's rest from its own pace when its
  // fraction done is known, else from the mean of finished cases while it is
  // below that mean; each later case at that mean (or this case's projected
  // length before any finished). "ETA unknown" rather than a figure that
  // says nothing is left while work remains.
  std::string Eta(double elapsed) const {
    const int later = total_ - finished_ - 1;
    const double mean = finished_ > 0 ? finished_seconds_ / finished_ : 0;
    std::optional<double> this_left, per_case;
    if (fraction_ > 0 && fraction_ < 1) this_left = elapsed * (1 - fraction_) / fraction_;
    else if (fraction_ >= 1) this_left = 0;  // its steps are done; saving or evaluating
    else if (finished_ > 0 && elapsed < mean) this_left = mean - elapsed;
    if (finished_ > 0) per_case = mean;
    else if (fraction_ > 0) per_case = elapsed / fraction_;
    if (!this_left || (later > 0 && !per_case)) return "ETA unknown";
    const double left = *this_left + (later > 0 ? later * *per_case : 0);
    if (left < 1) return later > 0 ? "ETA unknown" : "ETA finishing";
    return "ETA run " + FormatEta(left);
  }

  void Line(const std::string& text) {
    if (open_) {
      write_("\r\x1b[K");
      open_ = false;
    }
    write_(text + "\n");
  }

  std::function<void(const std::string&)> write_;
  Clock& clock_;
  bool tty_;
  bool open_ = false;  // a status line is drawn without its newline
  int total_ = 0;
  int finished_ = 0;
  double finished_seconds_ = 0;
  double case_start_ = 0;
  double fraction_ = 0;  // of the running case, 0 when unknown
  double last_status_ = 0;
};

}  // namespace

std::string FormatElapsed(double seconds) {
  long s = static_cast<long>(std::floor(seconds < 0 ? 0 : seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
}

std::string FormatEta(double seconds) {
  long s = static_cast<long>(std::lround(seconds < 0 ? 0 : seconds));
  if (s < 60) return fmt::format("{}s", s);
  if (s < 3600) return fmt::format("{}m", (s + 30) / 60);
  return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
}

std::unique_ptr<Progress> MakeTerminalProgress(std::function<void(const std::string&)> write,
                                               Clock& clock, bool is_terminal) {
  return std::make_unique<TerminalProgress>(std::move(write), clock, is_terminal);
}

std::unique_ptr<Progress> MakeTerminalProgress() {
  return MakeTerminalProgress(
      [](const std::string& text) {
        std::fwrite(text.data(), 1, text.size(), stderr);
        std::fflush(stderr);
      },
      SystemClock(), isatty(STDERR_FILENO) != 0);
}

}  // namespace protocol
