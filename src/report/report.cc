#include "report/report.h"


#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "report/collect.h"
#include "report/formats/csv.h"
#include "report/formats/report_json.h"
#include "report/render.h"
#include "report/report_data.h"
#include "runner/base/text.h"

#ifndef PROTOCOL_TEMPLATE_DIR
#define PROTOCOL_TEMPLATE_DIR ""
#endif

namespace protocol {

namespace {

namespace fs = std::filesystem;

// The format registry: name, default template, whether it shows the history charts.
struct FormatRow {
  const char* name;
  ReportFormat format;
  const char* template_file;  // "" for formats built without a template
  bool shows_history;         // with the default template
};
const FormatRow kFormats[] = {
    {"md", ReportFormat::kMarkdown, "report.md.mustache", false},
    {"html", ReportFormat::kHtml, "report.html.mustache", true},
    {"json", ReportFormat::kJson, "", true},
    {"csv", ReportFormat::kCsv, "", false},
};

std::string ExecutableDir() {
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return exe.parent_path().string();
}

Result<std::string> ReadFile(const std::string& path) {
  auto text = ReadFileText(path);
  if (!text.ok()) return Status::IoError(fmt::format("{}: cannot read template", path));
  return text;
}

}  // namespace

bool ParseReportFormat(const std::string& text, ReportFormat* out) {
  for (const auto& row : kFormats) {
    if (text == row.name) {
      *out = row.format;
      return true;
    }
  }
  return false;
}

Result<std::string> FindTemplate(const std::string& file_name) {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("PROTOCOL_TEMPLATES"); env && *env) dirs.push_back(env);
  std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) dirs.push_back((fs::path(exe_dir) / ".." / "share" / "protocol" / "templates").string());
  if (std::string(PROTOCOL_TEMPLATE_DIR) != "") dirs.push_back(PROTOCOL_TEMPLATE_DIR);
  std::vector<std::string> tried;
  for (const auto& dir : dirs) {
    fs::path p = fs::path(dir) / file_name;
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p.string();
    tried.push_back(p.string());
  }
  return Status::NotFound(fmt::format("template {} not found; looked in: {} (set PROTOCOL_TEMPLATES)", file_name,
                                      tried.empty() ? "nowhere" : Join(tried, ", ")));
}

bool FormatShowsHistory(ReportFormat format, const std::string& template_path) {
  for (const auto& row : kFormats)
    if (row.format == format) return row.shows_history || (!template_path.empty() && *row.template_file);
  return true;
}

Result<ReportData> CollectReport(Store& store, const ReportOptions& options) {
  auto input = CollectReportInput(store, options);
  if (!input.ok()) return input.status();
  return ComputeReport(input.value(), options);
}

Result<std::string> RenderReport(const ReportData& data, ReportFormat format, const std::string& template_path) {
  if (format == ReportFormat::kJson) return ReportToJson(data).dump(2) + "\n";
  if (format == ReportFormat::kCsv) return ReportToCsv(data);

  std::string path = template_path;
  if (path.empty()) {
    for (const auto& row : kFormats) {
      if (row.format != format) continue;
      auto found = FindTemplate(row.template_file);
      if (!found.ok()) return found.status();
      path = found.value();
    }
  }
  auto text = ReadFile(path);
  if (!text.ok()) return text.status();
  return RenderTemplate(text.value(), path, ReportView(data),
                        format == ReportFormat::kHtml ? Escape::kHtml : Escape::kMarkdown);
}

Result<std::string> BuildReport(Store& store, const ReportOptions& options, ReportFormat format,
                                const std::string& template_path) {
  ReportOptions read = options;
  read.history = options.history && FormatShowsHistory(format, template_path);
  auto data = CollectReport(store, read);
  if (!data.ok()) return data.status();
  return RenderReport(data.value(), format, template_path);
}

}  // namespace protocol
