#include "report/tables/cells.h"

// docs/report.md, "Cells": which result, repeats, training and inference
// values, markers.

#include <algorithm>

#include "runner/analysis/compare_stats.h"
#include "runner/base/text.h"

namespace protocol {

namespace {

CaseFigure FigureFromMeasurement(const Measurement& m, const RunRecord& run) {
  CaseFigure f;
  f.how = m.how;
  f.method = m.method;
  f.source = m.source.empty() ? run.source : m.source;
  if (m.marker == "not-provided") {
    f.marker = "X";
    return f;  // no value, whatever was stored
  }
  f.value = m.value;
  if (m.marker == "extrapolated" || m.how == Provenance::kExtrapolated || m.how == Provenance::kPrefix) f.marker = "*";
  return f;
}

}  // namespace

std::optional<CaseFigure> WallFigure(const CaseEntry& e) {
  for (const auto& m : e.c->measurements)
    if (m.name == metric::kWallSeconds && m.length_unit == e.length_unit && m.length_count == e.length_count)
      return FigureFromMeasurement(m, *e.run);
  return std::nullopt;
}

std::optional<CaseFigure> NamedFigure(const CaseEntry& e, const std::string& name) {
  if (!e.length_unit.empty()) return std::nullopt;
  for (const auto& m : e.c->measurements) {
    if (m.name == name) return FigureFromMeasurement(m, *e.run);
  }
  return std::nullopt;
}

std::optional<CaseFigure> InferenceFigure(const CaseEntry& e, const std::string& name) {
  if (auto f = NamedFigure(e, name)) return f;
  const auto& reqs = e.c->requests;
  if (reqs.empty()) return std::nullopt;
  double seconds = 0, generated = 0;
  for (const auto& r : reqs) {
    seconds += r.seconds;
    generated += r.generated_tokens;
  }
  CaseFigure f;
  f.derived_from = static_cast<int>(reqs.size());
  if (name == metric::kTotalGenerationSeconds) {
    f.value = seconds;
  } else if (name == metric::kSecondsPerToken) {
    if (generated > 0) f.value = seconds / generated;
  } else if (name == metric::kTokensPerSecond) {
    if (seconds > 0) f.value = generated / seconds;
  }
  if (!f.value) return std::nullopt;
  return f;
}

/// `scale` converts the stored unit to the display unit (1/60 for minutes).
ResolvedCell Resolve(const CellResults* cell, const FigureFn& get, double scale, const std::string& unit,
                 const FormatFn& format) {
  ResolvedCell r;
  if (!cell || !cell->Winning()) {
    r.marker = kDash;
    if (cell && !cell->failures.empty()) {
      std::vector<std::string> why;
      for (const auto* f : cell->failures) why.push_back(f->text);
      r.origin = "no ok result: " + Join(why, "; ");
    }
    return r;
  }
  const auto& entries = *cell->Winning();
  r.run_id = cell->WinningRun();
  std::vector<double> values;
  std::vector<std::string> case_ids;
  bool star = false, not_provided = false, extrap = false, prefix = false, declared = false, imported = false;
  int derived_from = 0;
  std::string method, source;
  for (const auto& e : entries) {
    if (std::find(case_ids.begin(), case_ids.end(), e.c->record.case_id) == case_ids.end()) {
      case_ids.push_back(e.c->record.case_id);
    }
    auto f = get(e);
    if (!f) continue;
    r.any = true;
    if (f->value) values.push_back(*f->value * scale);
    CellSource src;
    src.run_id = e.run->id;
    src.case_id = e.c->record.case_id;
    src.repeat = e.c->record.repeat;
    src.value_text = f->value ? format(*f->value * scale) + (unit.empty() ? "" : " " + unit) + (f->marker == "*" ? " *" : "")
                              : "not provided";
    src.how = ProvenanceName(f->how);
    if (f->derived_from) src.how += fmt::format(", derived from {} requests", f->derived_from);
    if (f->how == Provenance::kExtrapolated || f->how == Provenance::kPrefix) src.detail = f->method;
    if (std::optional<double> share = ContendedShare(e.c->measurements))
      r.contended = std::max(r.contended.value_or(0), *share);
    if (f->how == Provenance::kImported) src.detail = f->source;
    src.log_sha256 = e.c->record.log_sha256;
    src.plan_sha256 = e.run->plan_sha256;
    r.sources.push_back(std::move(src));
    if (f->marker == "*") star = true;
    if (f->marker == "X") not_provided = true;
    if (f->how == Provenance::kExtrapolated) extrap = true;
    if (f->how == Provenance::kPrefix) prefix = true;
    if (f->how == Provenance::kDeclared) declared = true;
    if (f->how == Provenance::kImported) imported = true;
    if (f->derived_from) derived_from = f->derived_from;
    if (method.empty()) method = f->method;
    if (source.empty()) source = f->source;
  }
  std::string where = fmt::format("run {}, case {}", r.run_id, Join(case_ids, ", "));
  if (!r.any) {
    r.marker = kDash;
    r.origin = where + " (ok, but no figure stored for this cell)";
    return r;
  }
  r.provenance = extrap ? "extrapolated" : prefix ? "prefix" : declared ? "declared" : imported ? "imported" : "measured";
  if (values.empty()) {
    r.marker = not_provided ? "X" : kDash;
    r.origin = imported ? fmt::format("imported from {} ({}: not provided)", source, where)
                        : where + ": not provided";
    return r;
  }
  r.value = *Median(values);
  r.values = values;
  r.min = *std::min_element(values.begin(), values.end());
  r.max = *std::max_element(values.begin(), values.end());
  r.n = static_cast<int>(values.size());
  r.marker = star ? "*" : "";
  std::string v = format(*r.value) + (unit.empty() ? "" : " " + unit);
  std::string what;
  if (r.n > 1) {
    std::string prefix = r.provenance == "measured" ? "" : r.provenance + ", ";
    what = fmt::format("{}repeats {}: median {}, spread {}–{}", prefix, r.n, v, format(r.min), format(r.max));
  } else if (derived_from) {
    what = fmt::format("measured, derived from {} requests: {}", derived_from, v);
  } else if (imported) {
    what = v;
  } else {
    what = r.provenance + ": " + v;
  }
  if (imported && star && !extrap) what += ", marked extrapolated";
  if ((extrap || prefix) && !method.empty()) what += "; method: " + method;
  r.origin = imported ? fmt::format("imported from {} ({}: {})", source, where, what)
                      : fmt::format("{} ({})", where, what);
  // An older result shown while a newer run failed: say so.
  for (const auto* f : cell->failures) {
    if (f->run_id > r.run_id) r.origin += "; newer, not ok: " + f->text;
  }
  if (std::optional<CaseLink> link = CellLink(cell)) {
    r.origin += "; link: " + LinkBesideLabel(*link);
    r.link_off_label = link->OffLabel();
  }
  return r;
}

std::optional<CaseLink> CellLink(const CellResults* cell) {
  if (!cell || !cell->Winning()) return std::nullopt;
  std::optional<CaseLink> out;
  std::vector<double> busbw, latency;
  for (const CaseEntry& e : *cell->Winning()) {
    if (e.c->record.nodes < 2) continue;
    const CaseLink link = LinkOfCase(e.c->measurements, e.c->facts);
    if (!link.measured()) continue;
    busbw.push_back(*link.busbw_bytes_per_second);
    if (link.latency_seconds) latency.push_back(*link.latency_seconds);
    if (!out) out = link;
    if (!out->nominal_bits_per_second && link.nominal_bits_per_second) {
      out->network = link.network;
      out->nominal_bits_per_second = link.nominal_bits_per_second;
    }
  }
  if (!out) return std::nullopt;
  out->busbw_bytes_per_second = Median(busbw);
  out->latency_seconds = latency.empty() ? std::nullopt : Median(latency);
  return out;
}

RunFigure MedianFigure(const std::vector<CaseEntry>& entries, const FigureFn& get, double scale) {
  RunFigure out;
  std::vector<double> values;
  for (const CaseEntry& e : entries) {
    auto f = get(e);
    if (!f) continue;
    if (f->value) values.push_back(*f->value * scale);
    if (f->marker == "*") out.extrapolated = true;
  }
  out.n = static_cast<int>(values.size());
  if (!values.empty()) out.value = *Median(values);
  return out;
}

ReportCell ValueCell(const std::string& column, const ResolvedCell& r,
                     const FormatFn& format) {
  ReportCell c;
  c.column = column;
  c.value = r.value;
  c.marker = r.marker;
  c.provenance = r.provenance;
  c.origin = r.origin;
  c.repeats = r.values;
  c.sources = r.sources;
  c.run_id = r.run_id;
  c.contended = r.contended;
  c.link_off_label = r.link_off_label;
  if (r.value) {
    c.text = format(*r.value) + (r.marker == "*" ? " *" : "") + (r.contended ? std::string(" ") + kContendedMark : "") +
             (r.link_off_label ? std::string(" ") + kLinkOffLabelMark : "");
  } else {
    c.text = r.marker;
  }
  return c;
}

ReportCell MarkerCell(const std::string& column, const std::string& marker) {
  ReportCell c;
  c.column = column;
  c.text = marker;
  c.marker = marker;
  return c;
}

}  // namespace protocol
