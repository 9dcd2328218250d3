#ifndef PROTOCOL_RUNNER_EXEC_PROGRESS_H_
#define PROTOCOL_RUNNER_EXEC_PROGRESS_H_

// What the user sees while a plan runs: case i/N, elapsed, ETA, live figures.
// An interface so tests can record events instead of printing.

#include <memory>
#include <string>

#include "runner/plan/plan.h"
#include "runner/store/records.h"

namespace protocol {

class Progress {
 public:
  virtual ~Progress() = default;
  // `index` is 1-based over the cases+repeats that will run; `total` their count.
  virtual void CaseStarted(int index, int total, const CaseSpec& spec, int repeat) = 0;
  virtual void CaseStatusLine(const std::string& text) = 0;  // live figure from the backend
  // How much of the running case is done, 0..1 (steps or requests reported
  // over those the case has); the runner calls it as samples arrive.
  virtual void CaseFractionDone(double fraction) {}
  virtual void CaseFinished(int index, int total, const CaseSpec& spec, int repeat,
                            CaseStatus status, double seconds, const std::string& reason) = 0;
  virtual void Message(const std::string& text) = 0;  // "dry run: would run ..." etc.
};

// Prints to stderr; redraws a single status line when stderr is a terminal,
// otherwise prints plain lines at most every few seconds (CI logs).
std::unique_ptr<Progress> MakeTerminalProgress();

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_EXEC_PROGRESS_H_
