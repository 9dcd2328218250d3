#include "report/formats/report_json.h"

#include <algorithm>

namespace protocol {

namespace {

Json CellJson(const ReportCell& c) {
  Json j;
  j["column"] = c.column;
  j["value"] = c.value ? Json(*c.value) : Json(nullptr);
  j["text"] = c.text;
  j["marker"] = c.marker;
  j["provenance"] = c.provenance;
  j["origin"] = c.origin;
  if (!c.repeats.empty()) j["repeats"] = c.repeats;
  if (c.interval) j["interval"] = {{"low", c.interval->low}, {"high", c.interval->high}};
  if (!c.interval_note.empty()) j["interval_note"] = c.interval_note;
  if (c.run_id != 0) j["run_id"] = c.run_id;
  if (c.numerator_run_id != 0 || c.denominator_run_id != 0) {
    j["numerator_run_id"] = c.numerator_run_id;
    j["denominator_run_id"] = c.denominator_run_id;
  }
  if (!c.refused.empty()) j["refused"] = c.refused;
  return j;
}

Json RowsJson(const std::vector<ReportRow>& rows) {
  return ArrayOf(rows, [](const ReportRow& r) {
    return Json{{"label", r.label}, {"unit", r.unit}, {"cells", ArrayOf(r.cells, CellJson)}};
  });
}

Json TicksJson(const std::vector<ChartTick>& ticks) {
  return ArrayOf(ticks, [](const ChartTick& t) { return Json{{"pos", t.pos}, {"label", t.label}}; });
}

Json MarkerJson(const ChartMarker& m) {
  Json j = {{"cx", m.cx}, {"cy", m.cy}, {"title", m.title}, {"count", m.count}, {"column", m.count > 1}};
  if (m.count > 1) {
    j["x"] = m.x;
    j["y"] = m.y;
    j["width"] = m.width;
    j["height"] = m.height;
  }
  return j;
}

Json SeriesJson(const ChartSeries& s) {
  return Json{{"label", s.label},
              {"color", s.color},
              {"points", s.points},
              {"legend_y", s.legend_y},
              {"dots", s.dots},
              {"markers", ArrayOf(s.markers, MarkerJson)}};
}

Json ChartJson(const Chart& c) {
  return Json{{"width", c.width},
              {"height", c.height},
              {"left", c.left},
              {"top", c.top},
              {"right", c.right},
              {"bottom", c.bottom},
              {"legend_x", c.legend_x},
              {"x_label", c.x_label},
              {"y_label", c.y_label},
              {"x_ticks", TicksJson(c.x_ticks)},
              {"y_ticks", TicksJson(c.y_ticks)},
              {"series", ArrayOf(c.series, SeriesJson)}};
}

Json VerdictJson(const VerdictLine& v) {
  return Json{{"table", v.table},
              {"row", v.row},
              {"scope", v.scope},
              {"claim", v.claim},
              {"quality", v.quality},
              {"bytes", v.bytes},
              {"equal_quality", v.equal_quality},
              {"equal_quality_cell", v.equal_quality_cell},
              {"expected", v.expected},
              {"expected_cell", v.expected_cell},
              {"energy", v.energy},
              {"energy_cell", v.energy_cell},
              {"qualifiers", v.qualifiers},
              {"notes", v.notes},
              {"text", v.text},
              {"compared", v.compared},
              {"speedup", v.speedup},
              {"loss_difference", v.loss_difference},
              {"bytes_between_nodes", v.bytes_between_nodes},
              {"caveats", v.caveats},
              {"finding", v.finding},
              {"conclusion", v.conclusion}};
}

Json ModelJson(const ModelReport& m) {
  Json j;
  j["model"] = m.model;
  j["verdict"] = ArrayOf(m.verdict, VerdictJson);
  j["verdict_legend"] = ArrayOf(m.verdict_legend, [](const auto& e) {
    return Json{{"tag", e.tag}, {"meaning", e.meaning}};
  });
  j["tables"] = ArrayOf(m.tables, [](const auto& t) {
    return Json{{"id", t.id},
                {"title", t.title},
                {"unit", t.unit},
                {"columns", t.columns},
                {"rows", RowsJson(t.rows)},
                {"efficiency", RowsJson(t.efficiency)},
                {"note", t.note}};
  });
  j["sentences"] = m.sentences;
  j["appendix"] = ArrayOf(m.appendix, [](const auto& a) {
    return Json{{"table", a.table}, {"row", a.row}, {"column", a.column}, {"text", a.text}};
  });
  j["failures"] = ArrayOf(m.failures, [](const auto& f) {
    return Json{{"run_id", f.run_id},
                {"case_id", f.case_id},
                {"repeat", f.repeat},
                {"status", f.status},
                {"reason", f.reason},
                {"text", f.text}};
  });
  j["untabulated"] = m.untabulated;
  j["chart"] = ChartJson(m.chart);
  j["requests"] = ArrayOf(m.requests, [](const auto& r) {
    return Json{{"series", r.series},
                {"run_id", r.run_id},
                {"case_id", r.case_id},
                {"repeat", r.repeat},
                {"index", r.index},
                {"max_new_tokens", r.max_new_tokens},
                {"generated_tokens", r.generated_tokens},
                {"seconds", r.seconds},
                {"seconds_text", r.seconds_text},
                {"answer", r.answer}};
  });
  j["provenance"] = ArrayOf(m.provenance, [](const auto& p) {
    const CellSource& s = p.source;
    return Json{{"table", p.table},
                {"row", p.row},
                {"column", p.column},
                {"run_id", s.run_id},
                {"case_id", s.case_id},
                {"repeat", s.repeat},
                {"value_text", s.value_text},
                {"how", s.how},
                {"detail", s.detail},
                {"log_sha256", s.log_sha256},
                {"plan_sha256", s.plan_sha256}};
  });
  j["ratios"] = ArrayOf(m.ratios, [](const auto& r) {
    return Json{{"table", r.table},
                {"row", r.row},
                {"column", r.column},
                {"text", r.text},
                {"numerator_run_id", r.numerator_run_id},
                {"denominator_run_id", r.denominator_run_id},
                {"note", r.note}};
  });
  j["equal_quality"] = ArrayOf(m.equal_quality, [](const auto& q) {
    return Json{{"row", q.row},
                {"scope", q.scope},
                {"target", q.target_text},
                {"baseline", q.baseline_text},
                {"candidate", q.candidate_text},
                {"ratio", q.ratio_text},
                {"steps_ratio", q.steps_ratio_text},
                {"note", q.note},
                {"chart", ChartJson(q.chart)}};
  });
  j["hardware"] = ArrayOf(m.hardware, [](const auto& h) {
    return Json{{"compared", h.compared},
                {"gpu", ChartJson(h.gpu)},
                {"link", ChartJson(h.link)},
                {"has_gpu", !h.gpu.series.empty()},
                {"has_link", !h.link.series.empty()}};
  });
  j["history"] = ArrayOf(m.history, [](const auto& h) {
    return Json{{"identity", h.identity}, {"y_label", h.y_label}, {"chart", ChartJson(h.chart)}};
  });
  return j;
}

}  // namespace

Json ReportToJson(const ReportData& data) {
  Json j;
  j["schema_version"] = data.schema_version;
  j["title"] = data.title;
  j["baseline_system"] = data.baseline_system;
  j["candidate_system"] = data.candidate_system;
  j["further_baseline_systems"] = data.further_baseline_systems;
  j["runs"] = ArrayOf(data.runs, [](const auto& r) {
    return Json{{"id", r.id},
                {"kind", r.kind},
                {"plan_name", r.plan_name},
                {"started_at", r.started_at},
                {"status", r.status},
                {"source", r.source}};
  });
  j["models"] = ArrayOf(data.models, ModelJson);
  j["empty_message"] = data.empty_message;
  return j;
}

Json ReportView(const ReportData& data) {
  Json j = ReportToJson(data);
  j["empty"] = !data.empty_message.empty();
  j["has_runs"] = !data.runs.empty();
  j["has_verdict"] = std::any_of(data.models.begin(), data.models.end(),
                                 [](const ModelReport& m) { return !m.verdict.empty(); });
  for (size_t i = 0; i < data.models.size(); ++i) {
    const ModelReport& m = data.models[i];
    Json& jm = j["models"][i];
    jm["has_sentences"] = !m.sentences.empty();
    jm["has_appendix"] = !m.appendix.empty();
    jm["has_failures"] = !m.failures.empty();
    jm["has_untabulated"] = !m.untabulated.empty();
    jm["has_chart"] = !m.chart.series.empty();
    jm["has_requests"] = !m.requests.empty();
    jm["has_provenance"] = !m.provenance.empty();
    jm["has_ratios"] = !m.ratios.empty();
    jm["has_history"] = !m.history.empty();
    // The verdict table: its optional columns, shown when a row fills them.
    auto any = [&m](std::string VerdictLine::*field) {
      return std::any_of(m.verdict.begin(), m.verdict.end(), [&](const VerdictLine& v) { return !(v.*field).empty(); });
    };
    jm["has_verdict"] = !m.verdict.empty();
    jm["has_equal_quality"] = any(&VerdictLine::equal_quality);
    jm["has_expected"] = any(&VerdictLine::expected);
    jm["has_energy"] = any(&VerdictLine::energy);
    jm["has_verdict_legend"] = !m.verdict_legend.empty();
    jm["several_models"] = data.models.size() > 1;
    // The speed-up at equal quality section (its table and charts).
    jm["has_equal_quality_rows"] = !m.equal_quality.empty();
    jm["has_hardware"] = !m.hardware.empty();
    jm["has_equal_quality_chart"] = std::any_of(m.equal_quality.begin(), m.equal_quality.end(),
                                                [](const EqualQualityRow& q) { return !q.chart.series.empty(); });
    for (size_t q = 0; q < m.equal_quality.size(); ++q)
      jm["equal_quality"][q]["has_chart"] = !m.equal_quality[q].chart.series.empty();
    for (size_t t = 0; t < m.tables.size(); ++t) {
      jm["tables"][t]["has_efficiency"] = !m.tables[t].efficiency.empty();
    }
  }
  return j;
}

}  // namespace protocol
