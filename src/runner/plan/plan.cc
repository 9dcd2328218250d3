#include "runner/plan/plan.h"

#include <filesystem>
#include <set>

#include "runner/base/text.h"

namespace protocol {

std::string SourceLocation::ToString() const {
  if (line <= 0) return file;
  return fmt::format("{}:{}:{}", file, line, column);
}

const char* WorkloadName(Workload w) {
  switch (w) {
    case Workload::kPretrain: return "pretrain";
    case Workload::kFinetune: return "finetune";
    case Workload::kInference: return "inference";
  }
  return "?";
}

std::optional<Workload> ParseWorkload(const std::string& s) {
  if (s == "pretrain") return Workload::kPretrain;
  if (s == "finetune") return Workload::kFinetune;
  if (s == "inference") return Workload::kInference;
  return std::nullopt;
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
