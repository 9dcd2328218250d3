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
  Json out = Json::array();
  for (const auto& r : rows) {
    Json j;
    j["label"] = r.label;
    j["unit"] = r.unit;
    j["cells"] = Json::array();
    for (const auto& c : r.cells) j["cells"].push_back(CellJson(c));
    out.push_back(std::move(j));
  }
  return out;
}

Json ChartJson(const Chart& c) {
  Json j;
  j["width"] = c.width;
  j["height"] = c.height;
  j["left"] = c.left;
  j["top"] = c.top;
  j["right"] = c.right;
  j["bottom"] = c.bottom;
  j["legend_x"] = c.legend_x;
  j["x_label"] = c.x_label;
  j["y_label"] = c.y_label;
  for (const char* axis : {"x_ticks", "y_ticks"}) {
    const auto& ticks = std::string(axis) == "x_ticks" ? c.x_ticks : c.y_ticks;
    j[axis] = Json::array();
    for (const auto& t : ticks) j[axis].push_back({{"pos", t.pos}, {"label", t.label}});
  }
  j["series"] = Json::array();
  for (const auto& s : c.series) {
    Json js;
    js["label"] = s.label;
    js["color"] = s.color;
    js["points"] = s.points;
    js["legend_y"] = s.legend_y;
    js["dots"] = s.dots;
    js["markers"] = Json::array();
    for (const auto& m : s.markers) {
      Json jm = {{"cx", m.cx}, {"cy", m.cy}, {"title", m.title}, {"count", m.count}, {"column", m.count > 1}};
      if (m.count > 1) {
        jm["x"] = m.x;
        jm["y"] = m.y;
        jm["width"] = m.width;
        jm["height"] = m.height;
      }
      js["markers"].push_back(std::move(jm));
    }
    j["series"].push_back(std::move(js));
  }
  return j;
}

Json ModelJson(const ModelReport& m) {
  Json j;
  j["model"] = m.model;
  j["verdict"] = Json::array();
  for (const auto& v : m.verdict) {
    j["verdict"].push_back({{"table", v.table},
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
                            {"conclusion", v.conclusion}});
  }
  j["verdict_legend"] = Json::array();
  for (const auto& e : m.verdict_legend) j["verdict_legend"].push_back({{"tag", e.tag}, {"meaning", e.meaning}});
  j["tables"] = Json::array();
  for (const auto& t : m.tables) {
    Json jt;
    jt["id"] = t.id;
    jt["title"] = t.title;
    jt["unit"] = t.unit;
    jt["columns"] = t.columns;
    jt["rows"] = RowsJson(t.rows);
    jt["efficiency"] = RowsJson(t.efficiency);
    jt["note"] = t.note;
    j["tables"].push_back(std::move(jt));
  }
  j["sentences"] = m.sentences;
  j["appendix"] = Json::array();
  for (const auto& a : m.appendix) {
    j["appendix"].push_back({{"table", a.table}, {"row", a.row}, {"column", a.column}, {"text", a.text}});
  }
  j["failures"] = Json::array();
  for (const auto& f : m.failures) {
    j["failures"].push_back({{"run_id", f.run_id}, {"case_id", f.case_id}, {"repeat", f.repeat},
                             {"status", f.status}, {"reason", f.reason}, {"text", f.text}});
  }
  j["untabulated"] = m.untabulated;
  j["chart"] = ChartJson(m.chart);
  j["requests"] = Json::array();
  for (const auto& r : m.requests) {
    Json jr;
    jr["series"] = r.series;
    jr["run_id"] = r.run_id;
    jr["case_id"] = r.case_id;
    jr["repeat"] = r.repeat;
    jr["index"] = r.index;
    jr["max_new_tokens"] = r.max_new_tokens;
    jr["generated_tokens"] = r.generated_tokens;
    jr["seconds"] = r.seconds;
    jr["seconds_text"] = r.seconds_text;
    jr["answer"] = r.answer;
    j["requests"].push_back(std::move(jr));
  }
  j["provenance"] = Json::array();
  for (const auto& p : m.provenance) {
    const CellSource& s = p.source;
    j["provenance"].push_back({{"table", p.table}, {"row", p.row}, {"column", p.column}, {"run_id", s.run_id},
                               {"case_id", s.case_id}, {"repeat", s.repeat}, {"value_text", s.value_text},
                               {"how", s.how}, {"detail", s.detail}, {"log_sha256", s.log_sha256},
                               {"plan_sha256", s.plan_sha256}});
  }
  j["ratios"] = Json::array();
  for (const auto& r : m.ratios) {
    j["ratios"].push_back({{"table", r.table}, {"row", r.row}, {"column", r.column}, {"text", r.text},
                           {"numerator_run_id", r.numerator_run_id}, {"denominator_run_id", r.denominator_run_id},
                           {"note", r.note}});
  }
  j["equal_quality"] = Json::array();
  for (const auto& q : m.equal_quality) {
    j["equal_quality"].push_back({{"row", q.row}, {"scope", q.scope}, {"target", q.target_text},
                                  {"baseline", q.baseline_text}, {"candidate", q.candidate_text},
                                  {"ratio", q.ratio_text}, {"steps_ratio", q.steps_ratio_text}, {"note", q.note},
                                  {"chart", ChartJson(q.chart)}});
  }
  j["hardware"] = Json::array();
  for (const auto& h : m.hardware)
    j["hardware"].push_back({{"compared", h.compared},
                             {"gpu", ChartJson(h.gpu)},
                             {"link", ChartJson(h.link)},
                             {"has_gpu", !h.gpu.series.empty()},
                             {"has_link", !h.link.series.empty()}});
  j["history"] = Json::array();
  for (const auto& h : m.history) {
    j["history"].push_back({{"identity", h.identity}, {"y_label", h.y_label}, {"chart", ChartJson(h.chart)}});
  }
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
  j["runs"] = Json::array();
  for (const auto& r : data.runs) {
    j["runs"].push_back({{"id", r.id}, {"kind", r.kind}, {"plan_name", r.plan_name},
                         {"started_at", r.started_at}, {"status", r.status}, {"source", r.source}});
  }
  j["models"] = Json::array();
  for (const auto& m : data.models) j["models"].push_back(ModelJson(m));
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
