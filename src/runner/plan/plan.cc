#include "runner/plan/plan.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <regex>
#include <set>

#include "runner/base/text.h"

namespace protocol {

std::string SourceLocation::ToString() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

template <>
const std::vector<VocabularyEntry<Workload>>& Vocabulary<Workload>() {
  static const std::vector<VocabularyEntry<Workload>> names = {
      {Workload::kPretrain, "pretrain"}, {Workload::kFinetune, "finetune"}, {Workload::kInference, "inference"}};
  return names;
}

template <>
const std::vector<VocabularyEntry<Quantization>>& Vocabulary<Quantization>() {
  static const std::vector<VocabularyEntry<Quantization>> names = {{Quantization::kNone, "none"},
                                                                    {Quantization::kNf4, "nf4"}};
  return names;
}

template <>
const std::vector<VocabularyEntry<DeviceChoice>>& Vocabulary<DeviceChoice>() {
  static const std::vector<VocabularyEntry<DeviceChoice>> names = {
      {DeviceChoice::kAuto, "auto"}, {DeviceChoice::kCpu, "cpu"}, {DeviceChoice::kCuda, "cuda"}};
  return names;
}

template <>
const std::vector<VocabularyEntry<Sharding>>& Vocabulary<Sharding>() {
  static const std::vector<VocabularyEntry<Sharding>> names = {{Sharding::kFull, "full"}, {Sharding::kHybrid, "hybrid"}};
  return names;
}

template <>
const std::vector<VocabularyEntry<ReduceDtype>>& Vocabulary<ReduceDtype>() {
  static const std::vector<VocabularyEntry<ReduceDtype>> names = {
      {ReduceDtype::kAuto, "auto"}, {ReduceDtype::kFloat32, "float32"}, {ReduceDtype::kBfloat16, "bfloat16"}};
  return names;
}

template <>
const std::vector<VocabularyEntry<OuterState>>& Vocabulary<OuterState>() {
  static const std::vector<VocabularyEntry<OuterState>> names = {{OuterState::kHost, "host"},
                                                                  {OuterState::kDevice, "device"}};
  return names;
}

template <>
const std::vector<VocabularyEntry<DecodeStepChoice>>& Vocabulary<DecodeStepChoice>() {
  static const std::vector<VocabularyEntry<DecodeStepChoice>> names = {
      {DecodeStepChoice::kHost, "host"}, {DecodeStepChoice::kDevice, "device"}, {DecodeStepChoice::kGraph, "graph"}};
  return names;
}

namespace {

// "12.5Mbit" -> 12.5 times the factor of its unit in `units` (lower case;
// the text's unit is compared case-insensitively), or nullopt.
std::optional<double> TcQuantity(std::string_view text, const std::map<std::string, double>& units) {
  static const std::regex re(R"(^([0-9]+(\.[0-9]+)?)([A-Za-z]+)$)");
  std::string s(text);
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  std::string name = m[3].str();
  std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
  auto unit = units.find(name);
  if (unit == units.end()) return std::nullopt;
  return std::stod(m[1].str()) * unit->second;
}

}  // namespace

Result<double> ParseTcRate(std::string_view text) {
  static const std::map<std::string, double> kUnits = {
      {"bit", 1}, {"kbit", 1e3}, {"mbit", 1e6}, {"gbit", 1e9}, {"tbit", 1e12},
      {"bps", 8}, {"kbps", 8e3}, {"mbps", 8e6}, {"gbps", 8e9}, {"tbps", 8e12},
  };
  if (auto bits = TcQuantity(text, kUnits); bits && *bits > 0) return *bits;
  return Status::InvalidArgument(fmt::format("bad bandwidth '{}' (tc rate, e.g. 100mbit, 1gbit)", text));
}

Result<double> ParseTcTime(std::string_view text) {
  static const std::map<std::string, double> kUnits = {{"us", 1e-6}, {"ms", 1e-3}, {"s", 1}};
  if (auto seconds = TcQuantity(text, kUnits)) return *seconds;
  return Status::InvalidArgument(fmt::format("bad delay '{}' (tc time, e.g. 2ms, 500us)", text));
}

const char* Length::UnitName() const { return unit == Unit::kSteps ? "steps" : "epochs"; }

std::string Length::ToString() const {
  if (unit == Unit::kEpochs) return fmt::format("{} {}", count, count == 1 ? "epoch" : "epochs");
  return fmt::format("{} {}", count, count == 1 ? "step" : "steps");
}

int Topology::NodeCount() const {
  std::set<std::string> nodes;
  for (const auto& p : parts) nodes.insert(p.node);
  return static_cast<int>(nodes.size());
}

int Topology::TotalRanks() const {
  int total = 0;
  for (const auto& p : parts) total += p.groups * p.ranks_per_group;
  return total;
}

std::string Topology::ToString() const {
  std::vector<std::string> out;
  for (const auto& p : parts) out.push_back(fmt::format("{}:{}x{}", p.node, p.groups, p.ranks_per_group));
  return Join(out, " ");
}

int64_t InferenceSchedule::TotalTokens() const {
  int64_t total = 0;
  for (int n : max_new_tokens) total += n;
  return total;
}

std::vector<const CaseSpec*> Plan::Cases() const {
  std::vector<const CaseSpec*> out;
  for (const auto& stage : stages)
    for (const auto& c : stage.cases) out.push_back(&c);
  return out;
}

const NetworkSpec* ClusterSpec::FindNetwork(const std::string& label) const {
  auto it = networks.find(label);
  return it == networks.end() ? nullptr : &it->second;
}

const NodeSpec* ClusterSpec::FindNode(const std::string& name) const {
  for (const NodeSpec& n : nodes)
    if (n.name == name) return &n;
  return nullptr;
}

const CaseSpec* Plan::FindCase(const std::string& id) const {
  for (const auto* c : Cases())
    if (c->id == id) return c;
  return nullptr;
}

std::string Plan::Directory() const {
  std::error_code ec;
  std::filesystem::path dir = std::filesystem::absolute(std::filesystem::path(file).parent_path(), ec);
  if (ec) dir = std::filesystem::path(file).parent_path();
  std::string text = dir.lexically_normal().string();
  if (text.size() > 1 && text.back() == '/') text.pop_back();
  return text;
}

std::string Plan::ResolvePath(const std::string& path) const {
  if (path.empty() || std::filesystem::path(path).is_absolute()) return path;
  return (std::filesystem::path(Directory()) / path).lexically_normal().string();
}

}  // namespace protocol
