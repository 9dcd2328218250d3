#ifndef PROTOCOL_RUNNER_ANALYSIS_JUNIT_H_
#define PROTOCOL_RUNNER_ANALYSIS_JUNIT_H_

// JUnit XML for CI systems (`--junit FILE` on run and compare). The layout
// follows the de-facto schema CI tools read (Jenkins' and GitLab's
// junit-4.xsd / Ant's JUnit task):
//
//   <testsuites name tests failures errors skipped time>
//     <testsuite name tests failures errors skipped time timestamp>
//       <properties><property name value/>…</properties>
//       <testcase classname name time>
//         <failure message type>text</failure> | <error message type>text</error> |
//         <skipped message/>
//         <system-out>text</system-out>
//       </testcase>
//
// Every attribute and text is XML-escaped; characters XML 1.0 forbids
// (control characters other than tab, CR, LF) are replaced by U+FFFD.

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "runner/analysis/compare.h"
#include "runner/base/status.h"
#include "runner/store/store.h"

namespace protocol {

struct JunitCase {
  std::string classname;
  std::string name;
  double time = 0;  // seconds
  enum class Outcome { kPassed, kFailure, kError, kSkipped };
  Outcome outcome = Outcome::kPassed;
  std::string message;  // failure / error / skipped message
  std::string type;     // failure / error type, e.g. "failed", "timeout", "regression"
  std::string text;     // failure / error body
  std::string system_out;
};

struct JunitSuite {
  std::string name;
  std::string timestamp;  // ISO 8601, may be empty
  std::vector<std::pair<std::string, std::string>> properties;
  std::vector<JunitCase> cases;
};

// The XML document (UTF-8, with declaration) for `suites` under <testsuites name=…>.
std::string RenderJunit(const std::string& name, const std::vector<JunitSuite>& suites);

// Text safe inside an XML attribute value or element.
std::string XmlEscape(std::string_view text);

// One suite for a stored run: a testcase per (case, repeat) — classname
// "protocol.<plan>.<stage>", name "<case_id>" or "<case_id> repeat N" (when the
// case has repeats) — with failed → failure, timeout → failure type "timeout",
// interrupted → error, skipped → skipped, each carrying the stored reason;
// time = the measured wall_seconds. `extra_failures` (case_id → message, e.g.
// reference-band verdicts of --check) turn the matching passed testcases of
// that case into failures of type "reference".
Result<JunitSuite> JunitSuiteForRun(
    Store& store, int64_t run_id,
    const std::vector<std::pair<std::string, std::string>>& extra_failures = {});

// One suite for a comparison: a testcase per case; regressed → failure type
// "regression" naming each regressed metric; incomparable → skipped with the
// reason; the figures in system-out.
JunitSuite JunitSuiteForCompare(const CompareReport& report);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_ANALYSIS_JUNIT_H_
