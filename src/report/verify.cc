#include "report/verify.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <set>

#include "report/report_data.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

const char* const kCommentOpen = "<!-- protocol report: ";
const char* const kCommentClose = " -->";

const char* FormatName(ReportFormat f) {
  switch (f) {
    case ReportFormat::kMarkdown: return "md";
    case ReportFormat::kHtml: return "html";
    case ReportFormat::kJson: return "json";
    case ReportFormat::kCsv: return "csv";
  }
  return "md";
}

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> lines = Split(text, '\n');
  return lines;
}

// Cells of a Markdown table row "| a | b |" → {"a", "b"}.
std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> parts = Split(line, '|');
  std::vector<std::string> cells;
  for (size_t i = 1; i + 1 < parts.size(); ++i) cells.push_back(Trim(parts[i]));
  return cells;
}

// A value in the comment, percent-encoded so that it is one token and cannot
// end the comment: every byte outside [A-Za-z0-9._/:+,=@-] becomes %XX (a
// space, '>', '<', '!', '%', a quote, non-ASCII). Plain labels read as they are.
std::string EncodeValue(const std::string& value) {
  std::string out;
  for (unsigned char c : value) {
    if (std::isalnum(c) || std::strchr("._/:+,=@-", c)) out += static_cast<char>(c);
    else out += fmt::format("%{:02X}", c);
  }
  return out;
}

// The inverse; a '%' not followed by two hex digits is refused.
Result<std::string> DecodeValue(const std::string& token) {
  std::string out;
  for (size_t i = 0; i < token.size(); ++i) {
    if (token[i] != '%') {
      out += token[i];
      continue;
    }
    if (i + 2 >= token.size() || !std::isxdigit(static_cast<unsigned char>(token[i + 1])) ||
        !std::isxdigit(static_cast<unsigned char>(token[i + 2])))
      return Status::InvalidArgument(fmt::format("report comment: '{}' has a '%' not followed by two hex digits", token));
    out += static_cast<char>(std::stoi(token.substr(i + 1, 2), nullptr, 16));
    i += 2;
  }
  return out;
}

}  // namespace

std::string InvocationText(const ReportInvocation& inv) {
  std::vector<std::string> parts;
  for (int64_t id : inv.options.run_ids) parts.push_back(fmt::format("--run {}", id));
  // Only when it says more than the runs do (a newer stored run).
  const int64_t newest_named =
      inv.options.run_ids.empty() ? 0 : *std::max_element(inv.options.run_ids.begin(), inv.options.run_ids.end());
  if (inv.options.history_through > newest_named)
    parts.push_back(fmt::format("--history-through {}", inv.options.history_through));
  if (!inv.options.model.empty()) parts.push_back("--model " + EncodeValue(inv.options.model));
  ReportOptions defaults;
  if (inv.options.baseline_system != defaults.baseline_system)
    parts.push_back("--baseline-system " + EncodeValue(inv.options.baseline_system));
  if (inv.options.candidate_system != defaults.candidate_system)
    parts.push_back("--candidate-system " + EncodeValue(inv.options.candidate_system));
  if (inv.options.further_baselines != defaults.further_baselines) {
    if (inv.options.further_baselines.empty()) parts.push_back("--further-baseline none");
    for (const std::string& s : inv.options.further_baselines) parts.push_back("--further-baseline " + EncodeValue(s));
  }
  parts.push_back(std::string("--format ") + FormatName(inv.format));
  if (!inv.template_path.empty()) parts.push_back("--template " + EncodeValue(inv.template_path));
  return Join(parts, " ");
}

Result<ReportInvocation> ParseReportComment(const std::string& text) {
  size_t at = text.find(kCommentOpen);
  if (at == std::string::npos || (at > 0 && text[at - 1] != '\n'))
    return Status::NotFound("the report has no '<!-- protocol report: ... -->' line");
  size_t end = text.find('\n', at);
  std::string line = text.substr(at, end == std::string::npos ? std::string::npos : end - at);
  if (!EndsWith(line, kCommentClose))
    return Status::InvalidArgument("the '<!-- protocol report:' line does not end with '-->'");
  std::string body = line.substr(std::string(kCommentOpen).size(),
                                 line.size() - std::string(kCommentOpen).size() -
                                     std::string(kCommentClose).size());
  std::vector<std::string> tokens;
  for (const std::string& t : Split(body, ' '))
    if (!t.empty()) tokens.push_back(t);
  ReportInvocation inv;
  bool further_named = false;  // the first --further-baseline replaces the default
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& flag = tokens[i];
    if (i + 1 >= tokens.size())
      return Status::InvalidArgument(fmt::format("report comment: '{}' has no value", flag));
    auto decoded = DecodeValue(tokens[++i]);
    if (!decoded.ok()) return decoded.status();
    const std::string& value = *decoded;
    if (flag == "--run") {
      char* e = nullptr;
      long long id = std::strtoll(value.c_str(), &e, 10);
      if (*e != '\0' || id <= 0)
        return Status::InvalidArgument(fmt::format("report comment: '{}' is not a run id", value));
      inv.options.run_ids.push_back(id);
    } else if (flag == "--history-through") {
      char* e = nullptr;
      long long id = std::strtoll(value.c_str(), &e, 10);
      if (*e != '\0' || id <= 0)
        return Status::InvalidArgument(fmt::format("report comment: '{}' is not a run id", value));
      inv.options.history_through = id;
    } else if (flag == "--model") {
      inv.options.model = value;
    } else if (flag == "--baseline-system") {
      inv.options.baseline_system = value;
    } else if (flag == "--candidate-system") {
      inv.options.candidate_system = value;
    } else if (flag == "--further-baseline") {
      if (!further_named) inv.options.further_baselines.clear();
      further_named = true;
      if (value != "none") inv.options.further_baselines.push_back(value);
    } else if (flag == "--format") {
      if (!ParseReportFormat(value, &inv.format))
        return Status::InvalidArgument(fmt::format("report comment: unknown format '{}'", value));
    } else if (flag == "--template") {
      inv.template_path = value;
    } else {
      return Status::InvalidArgument(fmt::format("report comment: unknown option '{}'", flag));
    }
  }
  if (inv.options.run_ids.empty())
    return Status::InvalidArgument("report comment: no --run (the runs must be named)");
  // Without --history-through the history ends at the newest named run.
  if (inv.options.history_through == 0)
    inv.options.history_through = *std::max_element(inv.options.run_ids.begin(), inv.options.run_ids.end());
  return inv;
}

Result<std::string> RenderReportFile(Store& store, ReportInvocation inv) {
  ReportOptions options = inv.options;
  options.history = FormatShowsHistory(inv.format, inv.template_path);
  // The history charts cover every stored run up to the newest, unless the
  // invocation (a report's comment) ends them earlier.
  if (options.history && options.history_through == 0) {
    auto runs = store.ListRunHeaders();
    if (!runs.ok()) return runs.status();
    if (!runs->empty()) options.history_through = runs->back().id;
  }
  auto data = CollectReport(store, options);
  if (!data.ok()) return data.status();
  auto text = RenderReport(data.value(), inv.format, inv.template_path);
  if (!text.ok()) return text.status();
  if (inv.format != ReportFormat::kMarkdown && inv.format != ReportFormat::kHtml) return text;
  // The comment names the runs read (those a figure shown or a failure
  // listed comes from): the same report again. A report with nothing shown
  // names the selected runs; an empty store none, and such a report cannot be
  // verified (nothing to re-render from).
  std::vector<int64_t> named;
  for (const ReportRunSummary& r : data->runs) named.push_back(r.id);
  if (named.empty()) named = inv.options.run_ids;
  if (named.empty()) {
    auto runs = store.ListRunHeaders();
    if (!runs.ok()) return runs.status();
    for (const RunRecord& r : *runs) named.push_back(r.id);
  }
  if (named.empty()) return text;
  inv.options.run_ids = named;
  inv.options.history_through = options.history ? options.history_through : 0;
  std::string comment = kCommentOpen + InvocationText(inv) + kCommentClose + "\n";
  std::string out = std::move(text).value();
  if (inv.format == ReportFormat::kHtml && StartsWith(out, "<!DOCTYPE")) {
    size_t nl = out.find('\n');
    if (nl == std::string::npos) return out + "\n" + comment;
    out.insert(nl + 1, comment);
    return out;
  }
  return comment + out;
}

std::vector<std::string> DescribeDifferences(const std::string& file_text, const std::string& expected,
                                             size_t limit) {
  std::vector<std::string> a = Lines(file_text), b = Lines(expected);
  std::vector<std::string> out;
  size_t extra = 0;
  auto add = [&](std::string s) {
    if (out.size() < limit) out.push_back(std::move(s));
    else ++extra;
  };
  const size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    const std::string* fa = i < a.size() ? &a[i] : nullptr;
    const std::string* fb = i < b.size() ? &b[i] : nullptr;
    if (fa && fb && *fa == *fb) continue;
    if (!fa) {
      add(fmt::format("line {}: missing in the file; the database gives '{}'", i + 1, *fb));
      continue;
    }
    if (!fb) {
      add(fmt::format("line {}: the file has '{}', the database gives no such line", i + 1, *fa));
      continue;
    }
    // Markdown table rows: name the row and the columns that differ.
    if (StartsWith(*fa, "|") && StartsWith(*fb, "|")) {
      std::vector<std::string> ca = Cells(*fa), cb = Cells(*fb);
      size_t header = i;
      while (header > 0 && StartsWith(b[header - 1], "|")) --header;
      std::vector<std::string> columns = Cells(b[header]);
      if (ca.size() == cb.size() && !ca.empty()) {
        for (size_t k = 0; k < ca.size(); ++k) {
          if (ca[k] == cb[k]) continue;
          std::string column = k < columns.size() ? columns[k] : std::to_string(k + 1);
          add(fmt::format("line {}, row '{}', column '{}': the file has '{}', the database gives '{}'",
                          i + 1, cb[0], column, ca[k], cb[k]));
        }
        continue;
      }
    }
    add(fmt::format("line {}: the file has '{}', the database gives '{}'", i + 1, *fa, *fb));
  }
  if (extra) out.push_back(fmt::format("\u2026 and {} more difference{}", extra, extra == 1 ? "" : "s"));
  return out;
}

Result<VerifyOutcome> VerifyReport(Store& store, const std::string& report_text,
                                   const ReportInvocation& fallback) {
  VerifyOutcome outcome;
  auto parsed = ParseReportComment(report_text);
  if (parsed.ok()) {
    outcome.invocation = parsed.value();
  } else if (parsed.status().code() == Status::Code::kNotFound) {
    outcome.invocation = fallback;
  } else {
    return parsed.status();
  }
  auto runs = store.ListRunHeaders();
  if (!runs.ok()) return runs.status();
  std::vector<int64_t>& ids = outcome.invocation.options.run_ids;
  if (ids.empty()) {
    for (const RunRecord& r : *runs) ids.push_back(r.id);
  }
  std::set<int64_t> stored;
  for (const RunRecord& r : *runs) stored.insert(r.id);
  for (int64_t id : ids) {
    if (!stored.count(id)) return Status::NotFound(fmt::format("run {} does not exist", id));
  }
  auto expected = RenderReportFile(store, outcome.invocation);
  if (!expected.ok()) return expected.status();
  outcome.match = expected.value() == report_text;
  if (!outcome.match) {
    outcome.differences = DescribeDifferences(report_text, expected.value());
    if (outcome.differences.empty())  // same lines, different bytes (e.g. a final newline)
      outcome.differences.push_back("the texts differ only in line endings or the final newline");
  }
  return outcome;
}

}  // namespace protocol
