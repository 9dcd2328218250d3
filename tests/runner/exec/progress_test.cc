#include <doctest/doctest.h>

#include "fake_clock.h"
#include "runner/exec/terminal_progress.h"

using namespace protocol;

namespace {
CaseSpec Spec(const std::string& id) {
  CaseSpec c;
  c.id = id;
  c.workload = Workload::kFinetune;
  c.backend = "fsdp";
  return c;
}
}  // namespace

TEST_CASE("Terminal progress in a log prints status lines at most every 5 s, with an ETA") {
  std::string out;
  FakeClock clock;
  auto progress = MakeTerminalProgress([&](const std::string& s) { out += s; }, clock, false);
  progress->CaseStarted(1, 3, Spec("2.1.1.3"), 0);
  clock.Advance(65);
  progress->CaseStatusLine("step 40/500 loss 2.31");
  clock.Advance(1);
  progress->CaseStatusLine("step 41/500 loss 2.30");  // within 5 s: not printed
  clock.Advance(54);
  progress->CaseFinished(1, 3, Spec("2.1.1.3"), 0, CaseStatus::kOk, 120, "");
  progress->CaseStarted(2, 3, Spec("2.1.1.4"), 0);
  clock.Advance(30);
  progress->CaseStatusLine("step 1/100");
  progress->CaseFinished(2, 3, Spec("2.1.1.4"), 0, CaseStatus::kFailed, 30.04, "exit code 1");
  progress->Message("done");
  CHECK(out ==
        "[1/3] 2.1.1.3 finetune fsdp (repeat 1/1) \u2026\n"
        "  step 40/500 loss 2.31 \u00b7 elapsed 1m05s \u00b7 ETA unknown\n"
        "[1/3] 2.1.1.3 ok 120.0 s\n"
        "[2/3] 2.1.1.4 finetune fsdp (repeat 1/1) \u2026\n"
        // mean 120 s × 2 cases not finished − 30 s elapsed = 210 s
        "  step 1/100 \u00b7 elapsed 30s \u00b7 ETA run 4m\n"
        "[2/3] 2.1.1.4 failed 30.0 s: exit code 1\n"
        "done\n");
}

TEST_CASE("Terminal progress on a terminal redraws the status line in place") {
  std::string out;
  FakeClock clock;
  auto progress = MakeTerminalProgress([&](const std::string& s) { out += s; }, clock, true);
  progress->CaseStarted(1, 1, Spec("2.1.1.1"), 0);
  progress->CaseStatusLine("a");
  progress->CaseStatusLine("b");
  progress->CaseFinished(1, 1, Spec("2.1.1.1"), 0, CaseStatus::kOk, 1.25, "");
  CHECK(out ==
        "[1/1] 2.1.1.1 finetune fsdp (repeat 1/1) \u2026\n"
        "\r\x1b[K  a \u00b7 elapsed 0s \u00b7 ETA unknown"
        "\r\x1b[K  b \u00b7 elapsed 0s \u00b7 ETA unknown"
        "\r\x1b[K[1/1] 2.1.1.1 ok 1.2 s\n");
}

TEST_CASE("The ETA follows the running case's own pace and is never 0 while cases remain") {
  std::string out;
  FakeClock clock;
  auto progress = MakeTerminalProgress([&](const std::string& s) { out += s; }, clock, false);
  auto last_line = [&] {
    std::string body = out.substr(0, out.size() - 1);
    return body.substr(body.rfind('\n') + 1);
  };
  progress->CaseStarted(1, 3, Spec("a"), 0);
  clock.Advance(60);
  progress->CaseFractionDone(0.25);
  progress->CaseStatusLine("step 25/100");
  // This case: 60 × 0.75 / 0.25 = 180 s; two later ones at its projected 240 s: 660 s.
  CHECK(last_line() == "  step 25/100 \u00b7 elapsed 1m00s \u00b7 ETA run 11m");
  progress->CaseFinished(1, 3, Spec("a"), 0, CaseStatus::kOk, 100, "");
  progress->CaseStarted(2, 3, Spec("b"), 0);
  clock.Advance(300);  // far beyond the mean of 100 s, with no fraction known
  progress->CaseStatusLine("loading");
  CHECK(last_line() == "  loading \u00b7 elapsed 5m00s \u00b7 ETA unknown");  // not "0s"
  clock.Advance(10);
  progress->CaseFractionDone(0.5);
  progress->CaseStatusLine("step 50/100");
  // 310 s more of this one + one case at the mean 100 s.
  CHECK(last_line() == "  step 50/100 \u00b7 elapsed 5m10s \u00b7 ETA run 7m");
  progress->CaseFinished(2, 3, Spec("b"), 0, CaseStatus::kOk, 620, "");
  progress->CaseStarted(3, 3, Spec("c"), 0);
  clock.Advance(6);
  progress->CaseFractionDone(1.0);
  progress->CaseStatusLine("saving");
  CHECK(last_line() == "  saving \u00b7 elapsed 6s \u00b7 ETA finishing");
}

TEST_CASE("Elapsed and ETA texts") {
  CHECK(FormatElapsed(42.9) == "42s");
  CHECK(FormatElapsed(65) == "1m05s");
  CHECK(FormatElapsed(7380) == "2h03m");
  CHECK(FormatEta(45) == "45s");
  CHECK(FormatEta(14 * 60 + 10) == "14m");
  CHECK(FormatEta(7380) == "2h03m");
}
