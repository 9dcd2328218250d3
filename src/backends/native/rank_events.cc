#include "backends/native/rank_events.h"

#include <algorithm>

#include "backends/native/estimate/memory_estimate.h"
#include "runner/base/text.h"
#include "runner/store/metric_table.h"

namespace protocol {
namespace native {
namespace {

// What a figure every rank reports about itself becomes for the case
// (metric_table.h): under its plain name, the largest or the mean over the
// ranks; kNotPerRank: only the ranks' own figures.
FromRanks FromRanksOf(const std::string& name) {
  const MetricRow* row = FindMetric(name);
  return row ? row->from_ranks : FromRanks::kNotPerRank;
}

}  // namespace

std::string DecodeStepMethodWords(DecodeStepChoice choice) {
  return choice == DecodeStepChoice::kHost ? "" : fmt::format(", decode_step {}", NameOf(choice));
}

void RankEventCollector::Add(int rank, const WorkerEvent& e, double now) {
  switch (e.kind) {
    case WorkerEvent::Kind::kStep:
      ++steps_seen_;
      events_.OnStep(e.step);  // its status line comes as a status event ("step 3/10 loss 4.10")
      break;
    case WorkerEvent::Kind::kRequest:
      ++requests_;
      generated_ += e.request.generated_tokens;
      events_.OnRequest(e.request);
      events_.OnStatusLine(fmt::format("request {}: {} tokens in {:.2f} s", e.request.index + 1,
                                       e.request.generated_tokens, e.request.seconds));
      break;
    case WorkerEvent::Kind::kMeasurement:
      AddMeasurement(rank, e);
      break;
    case WorkerEvent::Kind::kNote:
      note_ = note_.empty() ? e.text : note_ + "; " + e.text;
      break;
    case WorkerEvent::Kind::kStatus:
      events_.OnStatusLine(e.text);
      break;
    case WorkerEvent::Kind::kBytes:
      within_ += e.bytes_within;
      between_ += e.bytes_between;
      between_nodes_ += e.bytes_between_nodes;
      between_nodes_steps_ += e.bytes_between_nodes_steps;
      ++bytes_reports_;
      reported_.insert(rank);
      break;
    case WorkerEvent::Kind::kError:
      errors_[rank] = e.text;
      break;
    case WorkerEvent::Kind::kSample:
      events_.OnSample(e.sample);
      break;
    case WorkerEvent::Kind::kHeartbeat:
      last_beat_[rank] = now;
      break;
    case WorkerEvent::Kind::kEvalPoint:  // rank 0 reports the curve (every rank evaluates)
      if (rank == 0) eval_curve_.push_back(e.eval_point);
      break;
    case WorkerEvent::Kind::kFact:  // rank 0 speaks for the case (every rank runs the same setup)
      if (rank == 0) facts_.push_back({e.text, e.value});
      break;
    case WorkerEvent::Kind::kRendezvous:  // the supervisor relays it to the other ranks (rendezvous.h)
      break;
  }
}

void RankEventCollector::AddMeasurement(int rank, const WorkerEvent& e) {
  const Measurement& m = e.measurement;
  if (e.rank) {  // a figure of the rank itself: <name>_rank<r>
    Measurement named = m;
    named.name = RankFigureName(m.name, *e.rank);
    if (FromRanksOf(m.name) == FromRanks::kLargest) {
      per_rank_[m.name][*e.rank] = std::move(named);
      return;
    }
    if (m.value && FromRanksOf(m.name) == FromRanks::kMean) means_[m.name][*e.rank] = *m.value;
    if (m.value && (m.name == metric::kStepSecondsMean || m.name == metric::kRankStepSecondsSpread ||
                    m.name == metric::kRankWorkSecondsMean)) {
      RankStepTimes& t = step_times_[*e.rank];
      t.rank = *e.rank;
      if (m.name == metric::kStepSecondsMean) t.step_mean = *m.value;
      else if (m.name == metric::kRankStepSecondsSpread) t.step_spread = *m.value;
      else t.work_mean = *m.value;
    }
    rank_step_figures_.push_back(std::move(named));
    return;
  }
  if (m.name == "group_eval_loss" && m.value) group_evals_.emplace_back(rank, *m.value);
  else if (m.name == "replica_seconds" && m.value) replica_seconds_.push_back(*m.value);
  else if (rank == 0) rank0_.push_back(m);
}

std::string RankEventCollector::ErrorOf(int rank) const {
  auto it = errors_.find(rank);
  return it == errors_.end() ? "" : it->second;
}

void RankEventCollector::AddCaseFigures(const DistLayout& layout, Workload workload, const std::string& decode_words,
                                        BackendOutcome& out) const {
  if (workload == Workload::kInference) AddInferenceFigures(layout, decode_words, out);
  else AddTrainingFigures(layout, out);
  AddPerRankFigures(layout, out);
  AddStragglers(layout, out);
  out.eval_curve = eval_curve_;
  NoteOnEveryMethod(out, note_);
}

void RankEventCollector::AddInferenceFigures(const DistLayout& layout, const std::string& decode_words,
                                             BackendOutcome& out) const {
  if (replica_seconds_.empty()) return;
  const double wall = *std::max_element(replica_seconds_.begin(), replica_seconds_.end());
  const std::string how = fmt::format(
      "{} requests over {} replica(s) of {} rank(s) in parallel (round-robin){}; time = the slowest replica's, from a "
      "common barrier",
      requests_, layout.groups, layout.group_size, decode_words);
  out.measurements.push_back(MeasuredFigure(metric::kTotalGenerationSeconds, wall, "s", how));
  out.measurements.push_back(MeasuredFigure(metric::kGeneratedTokens, static_cast<double>(generated_), "tokens", how));
  if (generated_ > 0 && wall > 0) {
    out.measurements.push_back(
        MeasuredFigure(metric::kSecondsPerToken, wall / static_cast<double>(generated_), "s/token", how));
    out.measurements.push_back(MeasuredFigure(metric::kTokensPerSecond, static_cast<double>(generated_) / wall,
                                              "tokens/s", how + " (aggregate)"));
  }
}

void RankEventCollector::AddTrainingFigures(const DistLayout& layout, BackendOutcome& out) const {
  if (!group_evals_.empty()) {
    auto best = std::min_element(group_evals_.begin(), group_evals_.end(),
                                 [](const auto& a, const auto& b) { return a.second < b.second; });
    std::vector<std::string> all;
    for (const auto& [rank, loss] : group_evals_)
      all.push_back(fmt::format("group {}: {:.4f}", rank / layout.group_size, loss));
    out.measurements.push_back(
        MeasuredFigure(metric::kBestGroupEvalLoss, best->second, "",
                       fmt::format("lowest held-out loss of a single group before the merge ({})", Join(all, ", "))));
  }
  // Training only: inference replicas issue no tensor collectives (barriers
  // only, which are not counted), so a 0 there would claim more than is known.
  // One rank sends nothing (its collectives are with itself), as the one process.
  const int world = layout.world();
  if (bytes_reports_ != world || world < 2) return;
  const int64_t steps = std::max<int64_t>(1, steps_seen_);
  const std::string how = fmt::format(
      "sum over {} ranks of the bytes each rank sent in the collectives it issued, counted as ring-algorithm volume "
      "(all-gather (W-1)·shard, reduce-scatter (W-1)/W·n, all-reduce 2(W-1)/W·n; with Gloo before libtorch 2.6 "
      "the reduce-scatter is an all-reduce); within groups {} ({} per step), between groups {}",
      world, FormatBytes(within_), FormatBytes(within_ / steps), FormatBytes(between_));
  out.measurements.push_back(
      MeasuredFigure(metric::kBytesCommunicated, static_cast<double>(within_ + between_), "bytes", how));
  out.measurements.push_back(MeasuredFigure(metric::kBytesWithinGroups, static_cast<double>(within_), "bytes",
                                            "FSDP collectives inside each group; see bytes_communicated"));
  out.measurements.push_back(MeasuredFigure(metric::kBytesBetweenGroups, static_cast<double>(between_), "bytes",
                                            "merges across groups; see bytes_communicated"));
  out.measurements.push_back(MeasuredFigure(
      metric::kBytesBetweenNodes, static_cast<double>(between_nodes_), "bytes",
      fmt::format("of bytes_communicated, what the ranks sent to a rank on another node: in the ring model a rank's "
                  "bytes cross when the next rank of its ring is on another node; {} node(s), {} per step",
                  layout.nodes(), FormatBytes(between_nodes_ / steps))));
  out.measurements.push_back(MeasuredFigure(
      metric::kBytesBetweenNodesPerStep, static_cast<double>(between_nodes_steps_) / static_cast<double>(steps),
      "bytes",
      fmt::format("the bytes between nodes of the {} training step(s) (evaluation and save left out), divided by "
                  "the steps; `protocol validate` gives the same figure by formula",
                  steps)));
  AddCommunication(layout, out);
}

// The means over the ranks (metric_table.h kMean: their own figures went
// out with the step times), and of communication, the share of in-flight
// time hidden.
void RankEventCollector::AddCommunication(const DistLayout& layout, BackendOutcome& out) const {
  std::map<std::string, double> mean;
  for (const MetricRow& row : MetricTable()) {
    if (row.from_ranks != FromRanks::kMean) continue;
    auto it = means_.find(row.name);
    if (it == means_.end() || static_cast<int>(it->second.size()) != layout.world()) continue;
    double sum = 0;
    for (const auto& [rank, value] : it->second) sum += value;
    mean[row.name] = sum / static_cast<double>(it->second.size());
    out.measurements.push_back(MeasuredFigure(
        row.name, mean[row.name], row.unit,
        fmt::format("mean over the {} ranks of {}_rank<r> (per step, after warm-up)", it->second.size(), row.name)));
  }
  if (!mean.count(metric::kCommExposedSeconds) || !mean.count(metric::kCommInFlightSeconds)) return;
  const double exposed = mean[metric::kCommExposedSeconds], in_flight = mean[metric::kCommInFlightSeconds];
  if (in_flight > 0)
    out.measurements.push_back(MeasuredFigure(
        metric::kCommHiddenShare, std::clamp(1.0 - exposed / in_flight, 0.0, 1.0), "",
        fmt::format("1 - Σ exposed / Σ in flight over the {} ranks ({:.4f} s / {:.4f} s per step): the share of the "
                    "collectives' time during which the rank computed instead of waiting",
                    layout.world(), exposed * layout.world(), in_flight * layout.world())));
}

// Every rank's own figure of the kLargest metrics (metric_table.h), and the largest as the case's.
void RankEventCollector::AddPerRankFigures(const DistLayout& layout, BackendOutcome& out) const {
  const int world = layout.world();
  for (const MetricRow& row : MetricTable()) {
    if (row.from_ranks != FromRanks::kLargest) continue;
    const char* base = row.name;
    auto it = per_rank_.find(base);
    if (it == per_rank_.end()) continue;
    const Measurement* largest = nullptr;
    int largest_rank = 0;
    for (const auto& [rank, m] : it->second) {
      out.measurements.push_back(m);
      if (m.value && (!largest || *m.value > *largest->value)) {
        largest = &m;
        largest_rank = rank;
      }
    }
    if (largest && static_cast<int>(it->second.size()) == world)
      out.measurements.push_back(MeasuredFigure(base, *largest->value, largest->unit,
                                                fmt::format("largest over the {} ranks of {}_rank<r> (rank {}: {})",
                                                            world, base, largest_rank, largest->method)));
  }
}

// Per-rank step times, and the stragglers among them (stragglers.h).
void RankEventCollector::AddStragglers(const DistLayout& layout, BackendOutcome& out) const {
  if (step_times_.empty()) return;
  for (const Measurement& m : rank_step_figures_) out.measurements.push_back(m);
  if (layout.world() < 2) return;  // one rank: nothing to straggle behind
  std::vector<RankStepTimes> times;
  for (auto [rank, t] : step_times_) {
    t.node = layout.rank_nodes[static_cast<size_t>(rank)];
    times.push_back(t);
  }
  const std::vector<Straggler> stragglers = FindStragglers(times, layout.group_size);
  std::vector<std::string> named;
  for (const Straggler& st : stragglers) named.push_back(DescribeStraggler(st));
  out.measurements.push_back(MeasuredFigure(
      metric::kStragglers, static_cast<double>(stragglers.size()), "ranks",
      fmt::format("ranks whose own work per step (step time minus time in collectives) exceeds their group's median "
                  "by more than {:g}%, of {} ranks{}{}",
                  kStragglerFraction * 100, times.size(), stragglers.empty() ? ": none" : ": ", Join(named, "; "))));
}

}  // namespace native
}  // namespace protocol
