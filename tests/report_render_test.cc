// Rendering: Markdown golden files, HTML structure and escaping, JSON, CSV,
// templates (custom, invalid, FindTemplate order).

#include <doctest/doctest.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include "report/csv.h"
#include "report/render.h"
#include "report/report.h"
#include "report/report_data.h"
#include "report/report_json.h"
#include "report_fixtures.h"

namespace protocol {
namespace {

using namespace report_test;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string Template(const std::string& name) {
  return ReadText(std::string(PROTOCOL_SOURCE_DIR) + "/templates/" + name);
}

std::string RenderMd(const ReportData& data) {
  auto out = RenderTemplate(Template("report.md.mustache"), "report.md.mustache", ReportView(data), Escape::kMarkdown);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return out.value();
}

std::string RenderHtml(const ReportData& data) {
  auto out = RenderTemplate(Template("report.html.mustache"), "report.html.mustache", ReportView(data), Escape::kHtml);
  REQUIRE_MESSAGE(out.ok(), out.status().ToString());
  return out.value();
}

// Compares `actual` with tests/golden/<name> byte for byte; rewrites the file
// instead when PROTOCOL_UPDATE_GOLDEN=1.
void CheckGolden(const std::string& name, const std::string& actual) {
  std::string path = std::string(PROTOCOL_SOURCE_DIR) + "/tests/golden/" + name;
  const char* update = std::getenv("PROTOCOL_UPDATE_GOLDEN");
  if (update && std::string(update) == "1") {
    std::ofstream(path, std::ios::binary) << actual;
    MESSAGE("rewrote " << path);
    return;
  }
  std::string expected = ReadText(path);
  REQUIRE_MESSAGE(!expected.empty(), path << " is missing; run with PROTOCOL_UPDATE_GOLDEN=1");
  CHECK(actual == expected);
}

ReportData Methodology() { return ComputeReport(MethodologyInput(), ReportOptions()); }

TEST_CASE("report render: markdown of the methodology layout matches the golden file") {
  CheckGolden("methodology.md", RenderMd(Methodology()));
}

TEST_CASE("report render: markdown of an empty store matches the golden file") {
  CheckGolden("empty.md", RenderMd(ComputeReport(ReportInput(), ReportOptions())));
}

}  // namespace
}  // namespace protocol
