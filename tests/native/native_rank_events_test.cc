// The worker protocol's typed events (events.h: a note, a rank's own figure)
// and the runner's RankEventCollector (rank_events.h) fed decoded events.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "backends/native/launch/events.h"
#include "backends/native/rank_events.h"

namespace protocol {
namespace native {
namespace {

struct RecordingEvents : CaseEvents {
  std::vector<StepSample> steps;
  std::vector<std::string> lines;
  std::vector<TelemetrySample> samples;
  void OnStep(const StepSample& s) override { steps.push_back(s); }
  void OnSample(const TelemetrySample& s) override { samples.push_back(s); }
  void OnRequest(const RequestSample&) override {}
  void OnStatusLine(const std::string& text) override { lines.push_back(text); }
};

// The event as a rank sends it and the runner reads it back.
WorkerEvent Sent(const WorkerEvent& e) {
  auto back = DecodeEvent(EncodeEvent(e));
  REQUIRE(back);
  return *back;
}

WorkerEvent Figure(const std::string& name, double value, const std::string& method, std::optional<int> rank = {}) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kMeasurement;
  e.measurement.name = name;
  e.measurement.value = value;
  e.measurement.method = method;
  e.rank = rank;
  return Sent(e);
}

WorkerEvent Note(const std::string& text) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kNote;
  e.text = text;
  return Sent(e);
}

WorkerEvent Bytes(int64_t within, int64_t between) {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kBytes;
  e.bytes_within = within;
  e.bytes_between = between;
  return Sent(e);
}

const Measurement* Find(const BackendOutcome& out, const std::string& name) {
  for (const Measurement& m : out.measurements)
    if (m.name == name) return &m;
  return nullptr;
}

DistLayout TwoRanks() {
  DistLayout l;
  l.groups = 1;
  l.group_size = 2;
  l.rank_nodes = {"n0", "n1"};
  return l;
}

}  // namespace

TEST_CASE("events: a note and a rank's own figure are events of their own") {
  WorkerEvent note;
  note.kind = WorkerEvent::Kind::kNote;
  note.text = "weights: seeded random";
  CHECK(EncodeEvent(note) == R"({"event":"note","text":"weights: seeded random"})");
  CHECK(Sent(note).kind == WorkerEvent::Kind::kNote);
  CHECK(Sent(note).text == "weights: seeded random");

  const WorkerEvent mine = Figure(metric::kPeakHostRss, 100, "rss", 1);
  CHECK(mine.rank == 1);
  CHECK(mine.measurement.name == metric::kPeakHostRss);
  CHECK(Figure(metric::kEvalLoss, 3, "held out").rank == std::nullopt);
}

TEST_CASE("events: a node's hardware reading travels as a sample event to the case's events") {
  WorkerEvent e;
  e.kind = WorkerEvent::Kind::kSample;
  e.sample = {12.5, "rig1", "eth0", quantity::kNetSent, 1048576};
  CHECK(EncodeEvent(e) ==
        R"({"event":"sample","seconds":12.5,"node":"rig1","device":"eth0","quantity":"net_sent_bytes","value":1048576.0})");
  RecordingEvents events;
  RankEventCollector collector(events);
  collector.Add(2, Sent(e), 0.0);
  REQUIRE(events.samples.size() == 1);
  CHECK(events.samples[0].node == "rig1");
  CHECK(events.samples[0].device == "eth0");
  CHECK(events.samples[0].quantity == quantity::kNetSent);
  CHECK(events.samples[0].value == 1048576.0);
  CHECK(events.samples[0].seconds == 12.5);  // the sender's clock: the runner places it on its own
}

TEST_CASE("rank events: per-rank figures are stored as <name>_rank<r> with the largest as the case's") {
  RecordingEvents live;
  RankEventCollector c(live);
  const DistLayout layout = TwoRanks();
  WorkerEvent step;
  step.kind = WorkerEvent::Kind::kStep;
  step.step.step = 1;
  step.step.loss = 2.5;
  c.Add(0, Sent(step), 0);
  WorkerEvent status;  // a step's status line comes as a status event, with the step count
  status.kind = WorkerEvent::Kind::kStatus;
  status.text = "step 1/4 loss 2.50";
  c.Add(0, Sent(status), 0);
  c.Add(0, Figure(metric::kFinalLoss, 2.5, "last step"), 0);
  c.Add(0, Figure(metric::kPeakHostRss, 100, "rss of 0", 0), 0);
  c.Add(1, Figure(metric::kPeakHostRss, 300, "rss of 1", 1), 0);
  c.Add(1, Figure(metric::kFinalLoss, 9, "rank 1 does not speak for the case"), 0);
  for (int r = 0; r < 2; ++r) {
    c.Add(r, Figure(metric::kStepSecondsMean, 1.0, "mean", r), 0);
    c.Add(r, Figure(metric::kRankStepSecondsSpread, 0.1, "spread", r), 0);
    c.Add(r, Figure(metric::kRankWorkSecondsMean, r == 1 ? 0.9 : 0.3, "work", r), 0);
    c.Add(r, Bytes(1000, 10), 0);
  }
  c.Add(0, Note("weights: seeded random"), 0);
  CHECK(c.Reported(0));
  CHECK(c.Reported(1));
  REQUIRE(live.steps.size() == 1);
  CHECK(live.lines == std::vector<std::string>{"step 1/4 loss 2.50"});

  BackendOutcome out;
  out.measurements = c.RankZeroFigures();
  REQUIRE(out.measurements.size() == 1);
  c.AddCaseFigures(layout, Workload::kPretrain, "", out);
  REQUIRE(Find(out, "peak_host_rss_bytes_rank0"));
  CHECK(*Find(out, "peak_host_rss_bytes_rank1")->value == 300);
  REQUIRE(Find(out, metric::kPeakHostRss));
  CHECK(*Find(out, metric::kPeakHostRss)->value == 300);
  CHECK(Find(out, metric::kPeakHostRss)->method ==
        "largest over the 2 ranks of peak_host_rss_bytes_rank<r> (rank 1: rss of 1); weights: seeded random");
  CHECK(Find(out, "step_work_seconds_mean_rank1"));
  CHECK(*Find(out, metric::kStragglers)->value == 1);  // rank 1 works 3 times as long as rank 0
  CHECK(*Find(out, metric::kBytesCommunicated)->value == 2020);
  CHECK(*Find(out, "bytes_within_groups")->value == 2000);
  CHECK(*Find(out, "bytes_between_groups")->value == 20);
  CHECK(Find(out, metric::kFinalLoss)->method == "last step; weights: seeded random");
  CHECK(*Find(out, metric::kFinalLoss)->value == 2.5);
}

TEST_CASE("rank events: errors, heartbeats and facts per rank") {
  RecordingEvents live;
  RankEventCollector c(live);
  WorkerEvent error;
  error.kind = WorkerEvent::Kind::kError;
  error.text = "loss became nan";
  c.Add(1, Sent(error), 0);
  WorkerEvent beat;
  beat.kind = WorkerEvent::Kind::kHeartbeat;
  c.Add(1, Sent(beat), 12.5);
  WorkerEvent fact;
  fact.kind = WorkerEvent::Kind::kFact;
  fact.text = fact::kDevice;
  fact.value = "cpu";
  c.Add(0, Sent(fact), 0);
  fact.value = "cuda:1";
  c.Add(1, Sent(fact), 0);
  CHECK(c.ErrorOf(1) == "loss became nan");
  CHECK(c.ErrorOf(0).empty());
  CHECK(c.last_beats().at(1) == 12.5);
  REQUIRE(c.facts().size() == 1);  // rank 0 speaks for the case
  CHECK(c.facts()[0].second == "cpu");
  CHECK_FALSE(c.Reported(1));
}

TEST_CASE("rank events: rank 0's held-out curve points travel as eval events into the outcome") {
  RecordingEvents live;
  RankEventCollector c(live);
  WorkerEvent point;
  point.kind = WorkerEvent::Kind::kEvalPoint;
  point.eval_point.step = 4;
  point.eval_point.tokens = 2048;
  point.eval_point.training_seconds = 1.5;
  point.eval_point.loss = 5.25;
  CHECK(EncodeEvent(point) == R"({"event":"eval","step":4,"tokens":2048,"training_seconds":1.5,"loss":5.25})");
  const WorkerEvent back = Sent(point);
  REQUIRE(back.kind == WorkerEvent::Kind::kEvalPoint);
  c.Add(0, back, 0);
  point.eval_point.loss = 9;  // another rank's copy of the point is not the case's
  c.Add(1, Sent(point), 0);
  BackendOutcome out;
  c.AddCaseFigures(TwoRanks(), Workload::kPretrain, "", out);
  REQUIRE(out.eval_curve.size() == 1);
  CHECK(out.eval_curve[0].step == 4);
  CHECK(out.eval_curve[0].tokens == 2048);
  CHECK(out.eval_curve[0].training_seconds == 1.5);
  CHECK(out.eval_curve[0].loss == 5.25);
}

TEST_CASE("rank events: the replicas' generation totals, their method naming a decode step off the host's position") {
  for (DecodeStepChoice step : {DecodeStepChoice::kHost, DecodeStepChoice::kDevice, DecodeStepChoice::kGraph}) {
    CAPTURE(NameOf(step));
    RecordingEvents live;
    RankEventCollector c(live);
    DistLayout replicas;
    replicas.groups = 2;
    replicas.group_size = 1;
    replicas.rank_nodes = {"n0", "n0"};
    for (int r = 0; r < 2; ++r) {
      WorkerEvent request;
      request.kind = WorkerEvent::Kind::kRequest;
      request.request.index = r;
      request.request.generated_tokens = 10 + r;
      c.Add(r, Sent(request), 0);
      c.Add(r, Figure("replica_seconds", r == 0 ? 2.0 : 3.0, "replica"), 0);
    }
    BackendOutcome out;
    c.AddCaseFigures(replicas, Workload::kInference, DecodeStepMethodWords(step), out);
    const Measurement* rate = Find(out, metric::kTokensPerSecond);
    REQUIRE(rate);
    CHECK(*rate->value == doctest::Approx(21.0 / 3.0));  // the slowest replica's time
    const std::string words = step == DecodeStepChoice::kHost ? "" : ", decode_step " + std::string(NameOf(step));
    CHECK(rate->method == "2 requests over 2 replica(s) of 1 rank(s) in parallel (round-robin)" + words +
                              "; time = the slowest replica's, from a common barrier (aggregate)");
    CHECK(Find(out, metric::kTotalGenerationSeconds)->method.find("(round-robin)" + words + ";") != std::string::npos);
  }
}

}  // namespace native
}  // namespace protocol
