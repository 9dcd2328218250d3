#ifndef PROTOCOL_TESTS_FAKE_PROGRESS_H_
#define PROTOCOL_TESTS_FAKE_PROGRESS_H_

// A Progress that records each event as one line of text, for exact asserts:
//   "started 1/3 2.1.1.1 r0", "status step 1/10", "finished 1/3 2.1.1.1 r0 ok 5 s",
//   "finished 2/3 2.1.1.2 r0 failed 1.5 s: exit code 1", "message would run ...".

#include <string>
#include <vector>

#include "runner/base/text.h"
#include "runner/exec/progress.h"

namespace protocol {

class RecordingProgress : public Progress {
 public:
  std::vector<std::string> events;

  void CaseStarted(int index, int total, const CaseSpec& spec, int repeat) override {
    events.push_back(fmt::format("started {}/{} {} r{}", index, total, spec.id, repeat));
  }
  void CaseStatusLine(const std::string& text) override { events.push_back("status " + text); }
  void CaseFinished(int index, int total, const CaseSpec& spec, int repeat, CaseStatus status,
                    double seconds, const std::string& reason) override {
    events.push_back(fmt::format("finished {}/{} {} r{} {} {} s{}", index, total, spec.id, repeat,
                                 CaseStatusName(status), seconds,
                                 reason.empty() ? "" : ": " + reason));
  }
  void Message(const std::string& text) override { events.push_back("message " + text); }
};

}  // namespace protocol

#endif  // PROTOCOL_TESTS_FAKE_PROGRESS_H_
