#ifndef PROTOCOL_REPORT_VERIFY_H_
#define PROTOCOL_REPORT_VERIFY_H_

// Reports an auditor can check: `protocol report` writes into every Markdown
// and HTML report the options that produced it, as a comment on its own line
// (first line of Markdown; right after <!DOCTYPE html> in HTML):
//
//   <!-- protocol report: --run 1 --run 3 --format md -->
//
// The runs are always listed explicitly: the runs read (those a figure shown
// or a failure listed comes from, ReportData::runs), whether runs were chosen
// or not, so later runs do not change what the report re-renders to. The
// HTML history charts cover every stored run, not only those: when the store
// held a newer run than the newest named one, the comment names it
// (`--history-through 7`); without it the history ends at the newest --run.
// `protocol report --verify FILE` reads that line back, renders again from the
// database and compares byte for byte; on a mismatch it lists the lines (and,
// in Markdown tables, the cells) that differ. JSON and CSV reports carry no
// comment: they are verified with the options given on the command line.

#include <string>
#include <vector>

#include "report/report.h"
#include "runner/base/status.h"
#include "runner/store/store.h"

namespace protocol {

struct ReportInvocation {
  ReportOptions options;  // run_ids explicit
  ReportFormat format = ReportFormat::kMarkdown;
  std::string template_path;  // "" = the default template
};

// "--run 1 --run 3 --format md" (plus --history-through when set, --model /
// --baseline-system / --candidate-system when not the defaults, one
// --further-baseline per further baseline when they are not the default ones
// ("--further-baseline none" for none), --template when given). Those values are percent-encoded (every byte outside
// [A-Za-z0-9._/:+,=@-] as %XX): a value is one token, spaces included, and no
// value can end the comment ("x -->" is written "x%20--%3E").
std::string InvocationText(const ReportInvocation& invocation);

// Finds the comment line in a report; kNotFound when there is none,
// kInvalidArgument when it cannot be read back (naming the token).
Result<ReportInvocation> ParseReportComment(const std::string& report_text);

// What `protocol report` writes: the report with the comment inserted (md,
// html), naming the runs read (the selected runs when nothing is shown; none
// for an empty store). Reads the history only for a format that shows it.
Result<std::string> RenderReportFile(Store& store, ReportInvocation invocation);

struct VerifyOutcome {
  bool match = false;
  ReportInvocation invocation;     // the options the report was re-rendered with
  std::vector<std::string> differences;  // "line 12, row 'pretrain 1000 steps', column 'share 1 node': file has '12.2', database gives '12.1'"
};

// Re-renders `report_text` from the store with the options of its comment,
// or `fallback` when it has none, and compares byte for byte.
Result<VerifyOutcome> VerifyReport(Store& store, const std::string& report_text,
                                   const ReportInvocation& fallback);

// Line-by-line differences between a file's text and the expected text (at
// most `limit` entries, then "… and N more differences"). Each entry quotes
// the whole line (or, in a Markdown table, the whole cell) from both sides,
// never a prefix: in HTML the differing part is often far into a long line.
std::vector<std::string> DescribeDifferences(const std::string& file_text,
                                             const std::string& expected, size_t limit = 20);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_VERIFY_H_
