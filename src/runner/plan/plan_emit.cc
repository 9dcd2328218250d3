#include "runner/plan/plan_emit.h"

#include <cmath>
#include <cstdint>
#include <regex>
#include <vector>

#include "runner/base/text.h"
#include "runner/plan/training_fields.h"
#include "runner/plan/yaml_tree.h"

namespace protocol {
namespace {

using Kind = YamlNode::Kind;

YamlNode Scalar(const std::string& s, bool quoted = false) {
  YamlNode n;
  n.kind = Kind::kScalar;
  n.scalar = s;
  n.quoted = quoted;
  return n;
}

// Strings that a reader could take for a number or boolean are quoted.
YamlNode Str(const std::string& s) {
  static const std::regex kTyped(R"(^([+-]?[0-9.]+([eE][+-]?[0-9]+)?|true|false|True|False|TRUE|FALSE)$)");
  return Scalar(s, std::regex_match(s, kTyped));
}
YamlNode Int(int64_t v) { return Scalar(std::to_string(v)); }
YamlNode Num(double v) { return Scalar(fmt::format("{}", v)); }
YamlNode Bool(bool v) { return Scalar(v ? "true" : "false"); }

// A training setting's value, as its kind is written.
YamlNode Setting(int64_t v) { return Int(v); }
YamlNode Setting(int v) { return Int(v); }
YamlNode Setting(double v) { return Num(v); }
YamlNode Setting(bool v) { return Bool(v); }
template <typename E, typename = std::enable_if_t<kIsVocabularySetting<E>>>
YamlNode Setting(E v) {
  return Str(NameOf(v));
}

struct MapBuilder {
  YamlNode node;
  MapBuilder() { node.kind = Kind::kMap; }
  MapBuilder& Add(const std::string& key, YamlNode value) {
    node.entries.emplace_back(Scalar(key), std::move(value));
    return *this;
  }
  MapBuilder& AddIf(bool cond, const std::string& key, YamlNode value) {
    if (cond) Add(key, std::move(value));
    return *this;
  }
};

// A fraction as the percentage text the parser reads back to the same double
// (it divides the written number by 100): the fewest fixed decimals that do.
std::string PercentText(double fraction) {
  for (int decimals = 0; decimals <= 20; ++decimals) {
    std::string text = fmt::format("{:.{}f}", fraction * 100, decimals);
    if (std::stod(text) / 100 == fraction) return text;
  }
  return fmt::format("{:.20f}", fraction * 100);
}

// The command block is written when any of it was given (a native case may
// carry one from defaults; the command backend's Check requires argv).
bool HasCommand(const CommandSpec& c) {
  return !c.argv.empty() || c.shell || !c.env.empty() || !c.workdir.empty() || !c.metrics.empty() ||
         !c.step_regex.empty() || !c.request_regex.empty() || !c.log_format.empty();
}

YamlNode Seq(std::vector<YamlNode> items) {
  YamlNode n;
  n.kind = Kind::kSequence;
  n.items = std::move(items);
  return n;
}

// `env:` as written: NAME: value entries, then `inherit` (absent when empty).
YamlNode EnvNode(const EnvSpec& env) {
  MapBuilder b;
  for (const auto& [k, v] : env.vars) b.Add(k, Str(v));
  if (!env.inherit.empty()) {
    std::vector<YamlNode> names;
    for (const std::string& n : env.inherit) names.push_back(Str(n));
    b.Add("inherit", Seq(std::move(names)));
  }
  return b.node;
}

YamlNode EmulationNode(const NetworkEmulation& e) {
  MapBuilder eb;
  eb.Add("bandwidth", Str(e.bandwidth));
  eb.AddIf(!e.delay.empty(), "delay", Str(e.delay));
  return eb.node;
}

YamlNode ResolvedCase(const CaseSpec& c) {
  MapBuilder b;
  b.Add("id", Str(c.id)).AddIf(!c.title.empty(), "title", Str(c.title));
  b.Add("workload", Str(WorkloadName(c.workload))).Add("backend", Str(c.backend)).Add("system", Str(c.system));
  b.Add("model", Str(c.model)).AddIf(!c.dataset.empty(), "dataset", Str(c.dataset));
  b.Add("nodes", Int(c.nodes)).AddIf(!c.topology.empty(), "topology", Str(c.topology.ToString()));
  b.AddIf(!c.network.empty(), "network", Str(c.network)).AddIf(!c.variant.empty(), "variant", Str(c.variant));
  if (c.length) b.Add(c.length->UnitName(), Int(c.length->count));
  // One length as a number (as plans usually write it), more as a list.
  auto lengths = [&](const char* key, const std::vector<Length>& list) {
    if (list.size() == 1) b.Add(key, Int(list[0].count));
    if (list.size() < 2) return;
    std::vector<YamlNode> counts;
    for (const Length& l : list) counts.push_back(Int(l.count));
    b.Add(key, Seq(std::move(counts)));
  };
  lengths("report_as", c.report_as);
  lengths("not_provided", c.not_provided);
  if (c.workload == Workload::kInference) {
    std::vector<YamlNode> tokens;
    for (int t : c.inference.max_new_tokens) tokens.push_back(Int(t));
    MapBuilder inf;
    inf.Add("prompt", Str(c.inference.prompt)).Add("max_new_tokens", Seq(std::move(tokens)));
    inf.Add("ignore_eos", Bool(c.inference.ignore_eos));
    inf.Add("decode_step", Str(NameOf(c.inference.decode_step)));
    b.Add("inference", inf.node);
  }
  b.Add("timeout", Num(c.timeout_seconds)).Add("repeats", Int(c.repeats)).Add("warmup_steps", Int(c.warmup_steps));
  b.AddIf(!c.output_dir.empty(), "output_dir", Str(c.output_dir));
  if (!c.env.empty()) b.Add("env", EnvNode(c.env));
  if (HasCommand(c.command)) {
    MapBuilder cmd;
    if (!c.command.argv.empty()) {
      std::vector<YamlNode> argv;
      for (const auto& a : c.command.argv) argv.push_back(Str(a));
      cmd.Add("argv", Seq(std::move(argv)));
    }
    cmd.Add("shell", Bool(c.command.shell));
    if (!c.command.env.empty()) {
      MapBuilder env;
      for (const auto& [k, v] : c.command.env) env.Add(k, Str(v));
      cmd.Add("env", env.node);
    }
    cmd.AddIf(!c.command.workdir.empty(), "workdir", Str(c.command.workdir));
    if (!c.command.metrics.empty()) {
      std::vector<YamlNode> metrics;
      for (const auto& m : c.command.metrics) {
        MapBuilder mb;
        mb.Add("name", Str(m.name)).Add("regex", Str(m.regex)).AddIf(!m.unit.empty(), "unit", Str(m.unit));
        metrics.push_back(mb.node);
      }
      cmd.Add("metrics", Seq(std::move(metrics)));
    }
    cmd.AddIf(!c.command.step_regex.empty(), "step_regex", Str(c.command.step_regex));
    cmd.AddIf(!c.command.request_regex.empty(), "request_regex", Str(c.command.request_regex));
    cmd.AddIf(!c.command.log_format.empty(), "log_format", Str(c.command.log_format));
    b.Add("command", cmd.node);
  }
  // Every training setting with its value, for every workload: the native
  // backends read device, seed and ranks_per_node for inference too, and a
  // value left out would mean whatever a later default is.
  MapBuilder tr;
  for (const TrainingField& field : TrainingFields())
    VisitField(field, c.training, [&](const auto& value) {
      tr.Add(field.name, IsAutoSetting(field, c.training) ? Str("auto") : Setting(value));
    });
  b.Add("training", tr.node);
  if (!c.references.empty()) {
    MapBuilder ref;
    auto pct = [](double f) { return (f < 0 ? "-" : "+") + PercentText(std::fabs(f)) + "%"; };
    for (const ReferenceBand& band : c.references)
      ref.Add(band.metric, Seq({Num(band.value), Scalar(pct(band.lower)), Scalar(pct(band.upper))}));
    b.Add("reference", ref.node);
  }
  if (c.quality_target_loss) {
    MapBuilder qt;
    qt.Add("loss", Num(*c.quality_target_loss));
    b.Add("quality_target", qt.node);
  }
  return b.node;
}

}  // namespace

std::string ResolvedText(const Plan& plan) {
  MapBuilder root;
  root.Add("protocol", Int(plan.format_version)).Add("name", Str(plan.name));
  root.AddIf(!plan.title.empty(), "title", Str(plan.title));
  MapBuilder models;
  for (const auto& [name, m] : plan.models) {
    MapBuilder mb;
    mb.AddIf(!m.preset.empty(), "preset", Str(m.preset));
    if (m.from_case.empty()) mb.AddIf(!m.path.empty(), "path", Str(m.path));
    else mb.Add("from_case", Str(m.from_case));
    mb.AddIf(m.quantization != Quantization::kNone, "quantization", Str(NameOf(m.quantization)));
    mb.Add("double_quant", Bool(m.double_quant));
    mb.AddIf(m.init_random, "init", Str("random"));
    models.Add(name, mb.node);
  }
  root.Add("models", models.node);
  MapBuilder datasets;
  for (const auto& [name, d] : plan.datasets) {
    MapBuilder db;
    db.Add("format", Str(d.format)).Add("path", Str(d.path));
    db.AddIf(!d.column.empty(), "column", Str(d.column));
    datasets.Add(name, db.node);
  }
  root.Add("datasets", datasets.node);
  MapBuilder cluster;
  cluster.Add("launcher", Str(plan.cluster.launcher)).AddIf(!plan.cluster.network.empty(), "network", Str(plan.cluster.network));
  std::vector<YamlNode> nodes;
  for (const auto& n : plan.cluster.nodes) {
    MapBuilder nb;
    nb.Add("name", Str(n.name)).Add("host", Str(n.host)).Add("gpus", Int(n.gpus));
    nb.Add("gpu_memory_gb", Num(n.gpu_memory_gb));  // 0: not stated
    // The time estimate's inputs, only when stated: no backend's run reads them.
    nb.AddIf(!n.gpu_model.empty(), "gpu_model", Str(n.gpu_model));
    nb.AddIf(n.gpu_mfu > 0, "gpu_mfu", Num(n.gpu_mfu));
    if (!n.env.empty()) nb.Add("env", EnvNode(n.env));
    nodes.push_back(nb.node);
  }
  cluster.Add("nodes", Seq(std::move(nodes)));
  if (plan.cluster.emulate) cluster.Add("emulate", EmulationNode(*plan.cluster.emulate));
  if (!plan.cluster.env.empty()) cluster.Add("env", EnvNode(plan.cluster.env));
  cluster.AddIf(plan.cluster.compare_across_networks, "compare_across_networks", Bool(true));
  if (!plan.cluster.networks.empty()) {
    MapBuilder networks;
    for (const auto& [label, net] : plan.cluster.networks) {
      MapBuilder nb;
      nb.Add("rate", Str(net.rate));
      if (!net.env.empty()) nb.Add("env", EnvNode(net.env));
      if (!net.addresses.empty()) {
        MapBuilder ab;
        for (const auto& [node, address] : net.addresses) ab.Add(node, Str(address));
        nb.Add("addresses", ab.node);
      }
      if (net.emulate) nb.Add("emulate", EmulationNode(*net.emulate));
      networks.Add(label, nb.node);
    }
    cluster.Add("networks", networks.node);
  }
  root.Add("cluster", cluster.node);
  std::vector<YamlNode> stages;
  for (const auto& s : plan.stages) {
    MapBuilder sb;
    sb.Add("name", Str(s.name)).AddIf(!s.title.empty(), "title", Str(s.title));
    std::vector<YamlNode> cases;
    for (const auto& c : s.cases) cases.push_back(ResolvedCase(c));
    sb.Add("cases", Seq(std::move(cases)));
    stages.push_back(sb.node);
  }
  if (plan.telemetry.interval_seconds != TelemetrySpec::kDefaultIntervalSeconds) {  // absent at the default
    MapBuilder telemetry;
    telemetry.Add("interval", Num(plan.telemetry.interval_seconds));
    root.Add("telemetry", telemetry.node);
  }
  root.Add("stages", Seq(std::move(stages)));
  if (!plan.interleave.empty()) {  // absent when unused: older resolved texts stay as they were
    std::vector<YamlNode> groups;
    for (const auto& group : plan.interleave) {
      std::vector<YamlNode> ids;
      for (const auto& id : group) ids.push_back(Str(id));
      groups.push_back(Seq(std::move(ids)));
    }
    root.Add("interleave", Seq(std::move(groups)));
  }
  return EmitYaml(root.node);
}

}  // namespace protocol
