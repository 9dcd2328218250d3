#include "report/report_options.h"

#include <algorithm>

namespace protocol {

std::vector<std::string> FurtherBaselines(const ReportOptions& o) {
  std::vector<std::string> out;
  for (const std::string& s : o.further_baselines)
    if (!s.empty() && s != o.baseline_system && s != o.candidate_system &&
        std::find(out.begin(), out.end(), s) == out.end())
      out.push_back(s);
  return out;
}

}  // namespace protocol
