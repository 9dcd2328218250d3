#include "runner/analysis/reference_check.h"

#include <cmath>
#include <map>

#include "runner/analysis/compare_stats.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

// How a reference metric reads in messages, and which stored figure it is.
struct ReferenceMetric {
  std::string label;    // "wall time"
  std::string unit;     // "min"
  std::string stored;   // measurement name
  double scale = 1;     // band unit = stored value × scale
  bool wall = false;    // prefers the extrapolated figure
};

ReferenceMetric Describe(const std::string& name) {
  if (name == "wall_minutes") return {"wall time", "min", metric::kWallSeconds, 1.0 / 60, true};
  if (name == metric::kWallSeconds) return {"wall time", "s", metric::kWallSeconds, 1, true};
  if (name == metric::kTokensPerSecond) return {"tokens per second", "tokens/s", name, 1, false};
  std::string label = name;
  for (char& c : label)
    if (c == '_') c = ' ';
  return {label, "", name, 1, false};
}

std::string Num(double v) { return fmt::format("{:.4g}", v); }

std::string Signed(double fraction) {
  if (fraction == 0) return "0 %";
  return fmt::format("{}{} %", fraction < 0 ? "\u2212" : "+", Num(std::fabs(fraction) * 100));
}

}  // namespace

std::string BandText(const ReferenceBand& band) {
  return Signed(band.lower) + " \u2026 " + Signed(band.upper);
}

std::vector<ReferenceVerdict> CheckReferences(const Plan& plan, const std::vector<CompareCase>& rows) {
  std::map<std::pair<std::string, int>, const CompareCase*> latest;
  for (const CompareCase& c : rows) latest[{c.record.case_id, c.record.repeat}] = &c;
  std::vector<ReferenceVerdict> out;
  for (const CaseSpec* spec : plan.Cases()) {
    if (spec->references.empty()) continue;
    std::vector<const CompareCase*> repeats, ok;
    for (const auto& [key, c] : latest)
      if (key.first == spec->id) {
        repeats.push_back(c);
        if (c->record.status == CaseStatus::kOk) ok.push_back(c);
      }
    if (repeats.empty()) continue;  // not run (--only)
    for (const ReferenceBand& band : spec->references) {
      ReferenceVerdict v;
      v.case_id = spec->id;
      v.band = band;
      const ReferenceMetric m = Describe(band.metric);
      std::string unit = m.unit;
      const std::string ref_text = fmt::format("the reference {}{}", Num(band.value),
                                               unit.empty() ? "" : " " + unit);
      if (ok.empty()) {
        v.message = fmt::format("{}: no figure to check against {}: the case did not end ok ({})",
                                m.label, ref_text, CaseStatusName(repeats.front()->record.status));
        out.push_back(std::move(v));
        continue;
      }
      std::vector<double> values;
      bool extrapolated = false;
      for (const CompareCase* c : ok) {
        const Measurement* pick = nullptr;
        for (const Measurement& x : c->measurements) {
          if (x.name != m.stored || !x.value) continue;
          if (m.wall && x.how == Provenance::kExtrapolated) pick = &x;
          else if (x.how == Provenance::kMeasured && (!pick || pick->how != Provenance::kExtrapolated))
            pick = &x;
        }
        if (!pick) continue;
        extrapolated |= pick->how == Provenance::kExtrapolated;
        values.push_back(*pick->value * m.scale);
        if (unit.empty()) unit = pick->unit;
      }
      if (values.size() != ok.size()) {
        v.message = fmt::format("no measured {} to check against {}", band.metric, ref_text);
        out.push_back(std::move(v));
        continue;
      }
      const double value = *Median(values);
      v.value = value;
      v.deviation = (value - band.value) / band.value;
      const double eps = 1e-9;
      v.pass = v.deviation >= band.lower - eps && v.deviation <= band.upper + eps;
      std::string figure = fmt::format("{} {}{}{}", m.label, Num(value), unit.empty() ? "" : " " + unit,
                                       extrapolated ? " (extrapolated)" : "");
      if (values.size() > 1) figure += fmt::format(" (median of {} repeats)", values.size());
      std::string ref = fmt::format("the reference {}{}", Num(band.value), unit.empty() ? "" : " " + unit);
      std::string how_far =
          v.deviation == 0 ? "equal to"
                           : fmt::format("{} % {}", fmt::format("{:.1f}", std::fabs(v.deviation) * 100),
                                         v.deviation > 0 ? "above" : "below");
      if (v.pass)
        v.message = fmt::format("{} is within the band of {} ({}; band {})", figure, ref,
                                v.deviation == 0 ? "equal" : how_far, BandText(band));
      else
        v.message = fmt::format("{} is {} {} (band {})", figure, how_far, ref, BandText(band));
      out.push_back(std::move(v));
    }
  }
  return out;
}

Result<std::vector<ReferenceVerdict>> CheckRunReferences(Store& store, const Plan& plan,
                                                         int64_t run_id) {
  auto side = CollectCompareSide(store, run_id);
  if (!side.ok()) return side.status();
  std::vector<ReferenceVerdict> verdicts = CheckReferences(plan, side->cases);
  std::vector<std::pair<std::string, std::string>> facts;
  for (const ReferenceVerdict& v : verdicts)
    facts.emplace_back(fmt::format("reference_check {} {}", v.case_id, v.band.metric),
                       (v.pass ? "pass: " : "fail: ") + v.message);
  if (!facts.empty())
    if (Status s = store.PutContext(run_id, facts); !s.ok()) return s;
  return verdicts;
}

}  // namespace protocol
