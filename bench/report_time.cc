// What `protocol report` costs without the program around it: the same calls
// as the command (ResolveRunSpec, RenderReportFile), in a program that links
// the report and store layers only, and times the report alone (store opened
// to text written); `protocol report` adds the command line's start-up
// (bench/report_scale.sh times both). Prints figures; asserts nothing.
//
//   build/protocol_report_time --db report-2000.db --run latest --format md --out r.md
//
// Prints the wall time of the report (store opened to text written) and the
// process's peak RSS (getrusage ru_maxrss).

#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "report/report.h"
#include "report/verify.h"
#include "runner/store/run_spec.h"

namespace {

using namespace protocol;

int Fail(const std::string& why) {
  std::fprintf(stderr, "protocol_report_time: %s\n", why.c_str());
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db, out, format_name = "md";
  std::vector<std::string> runs;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i], value = argv[i + 1];
    if (flag == "--db") db = value;
    else if (flag == "--out") out = value;
    else if (flag == "--run") runs.push_back(value);
    else if (flag == "--format") format_name = value;
    else return Fail("unknown option " + flag);
  }
  if (db.empty() || out.empty())
    return Fail("usage: protocol_report_time --db DB [--run SPEC]... [--format md|html|json|csv] --out FILE");
  const auto start = std::chrono::steady_clock::now();
  ReportInvocation invocation;
  if (!ParseReportFormat(format_name, &invocation.format)) return Fail("unknown format " + format_name);
  auto store = OpenStore(db);
  if (!store.ok()) return Fail(store.status().ToString());
  for (const std::string& spec : runs) {
    auto id = ResolveRunSpec(**store, spec);
    if (!id.ok()) return Fail(id.status().ToString());
    invocation.options.run_ids.push_back(*id);
  }
  auto text = RenderReportFile(**store, invocation);
  if (!text.ok()) return Fail(text.status().ToString());
  std::ofstream(out, std::ios::binary) << *text;
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  std::printf("%.3f s, peak RSS %.1f MiB, %zu bytes\n", seconds, usage.ru_maxrss / 1024.0, text->size());
  return 0;
}
