// time_estimate.h: a case's expected wall time, every term by formula on a
// small config; and the plans' estimates through native_case_time (the
// device table, gpu_mfu, the network label, a calibrated CPU host).
#include "native_test_support.h"

#include "backends/native/check/native_check.h"
#include "backends/native/platform/device_peak.h"
#include "backends/native/estimate/memory_estimate.h"
#include "backends/native/estimate/time_estimate.h"
#include "runner/plan/plan_parser.h"

namespace protocol {
namespace native {
namespace {

// C 32, L 2, NH 4 (HD 8), NKV 2, F 64, V 10: N = 19232, N_emb = 320.
ModelConfig Small() { return protocol::testing::TinyTestConfig(10, 2); }

const TimeTerm* Term(const TimeEstimate& e, const std::string& name) {
  for (const TimeTerm& t : e.terms)
    if (t.name == name) return &t;
  return nullptr;
}

TrainingTimeShape SmallTraining() {
  TrainingTimeShape s;
  s.config = Small();
  s.steps = 10;
  s.seq_len = 16;
  s.tokens_per_step = 4 * 16;
  s.eval_tokens = 128;
  s.devices = 2;
  s.device.flops_per_device = 1e9;
  s.device.mfu = 0.5;
  s.device.link_bytes_per_second = 1e6;
  s.device.rank_start_seconds = 0.5;
  s.step_bytes_within_node_per_rank = 1000;
  s.step_bytes_between_nodes_per_link = 2000;
  s.network_bytes_per_second = 1e6;
  s.network = "1 MB/s";
  s.merges = 2;
  s.merge_bytes_per_link = 5000;
  s.rank_processes = 2;
  s.load_bytes = 4'000'000'000;
  s.save_bytes = 2'000'000'000;
  return s;
}

}  // namespace

TEST_CASE("time estimate: training terms by formula (6·(N − N_emb) + 12·L·H·Q·T per token)") {
  TrainingTimeShape s = SmallTraining();
  REQUIRE(s.config.ParameterCount() == 19232);
  // f = 6·18912 + 12·2·4·8·16 = 113472 + 12288 = 125760 FLOPs per token.
  const double f = 125760;
  CHECK(s.config.TrainingFlopsPerToken(16) == f);
  TimeEstimate e = estimate_training_time(s);
  REQUIRE(e.estimated());
  const double compute = 10 * 64 * f / (2 * 1e9 * 0.5);  // steps · tokens · f / (devices · peak · MFU)
  CHECK(Term(e, "compute")->seconds == doctest::Approx(compute));
  // One ring: per step the slower of 1000 B within (1 ms) and 2000 B between (2 ms), 10 steps.
  CHECK(Term(e, "communication")->seconds == doctest::Approx(0.02));
  CHECK_FALSE(Term(e, "communication")->counted);  // prefetch: hidden behind the larger compute
  CHECK(Term(e, "merges")->seconds == doctest::Approx(2 * 5000 / 1e6));
  CHECK(Term(e, "evaluation")->seconds == doctest::Approx(128 * f / 3 / 1e9));
  CHECK(Term(e, "start-up")->seconds == doctest::Approx(0.5 + 4e9 / kAssumedDiskBytesPerSecond));
  CHECK(Term(e, "save")->seconds == doctest::Approx(2e9 / kAssumedDiskBytesPerSecond));
  const double total = 2.5 + compute + 0.01 + 128 * f / 3 / 1e9 + 1.0;
  CHECK(e.seconds == doctest::Approx(total));
  CHECK(e.Largest()->name == "start-up");

  // Without prefetch the communication adds to the compute.
  s.prefetch = false;
  TimeEstimate sum = estimate_training_time(s);
  CHECK(sum.seconds == doctest::Approx(total + 0.02));
  CHECK(Term(sum, "communication")->counted);
  // Hybrid sharding: within and between are two collectives, their sum (3 ms a step).
  s.one_ring = false;
  CHECK(Term(estimate_training_time(s), "communication")->seconds == doctest::Approx(0.03));
  // A slow link: with prefetch the communication is the larger and counts, compute does not.
  s.prefetch = true;
  s.one_ring = true;
  s.network_bytes_per_second = 1e3;  // 2 s a step
  TimeEstimate slow = estimate_training_time(s);
  CHECK(Term(slow, "communication")->seconds == doctest::Approx(20));
  CHECK(Term(slow, "communication")->counted);
  CHECK_FALSE(Term(slow, "compute")->counted);
  CHECK(slow.Largest()->name == "communication");
  CHECK(slow.seconds == doctest::Approx(2.5 + 20 + 2 * 5000 / 1e3 + 128 * f / 3 / 1e9 + 1.0));
  // 4-bit (QLoRA): the base is frozen, 4·(N − N_emb) instead of 6·.
  s = SmallTraining();
  s.frozen_base = true;
  CHECK(Term(estimate_training_time(s), "compute")->seconds ==
        doctest::Approx(10 * 64 * (4 * 18912.0 + 12288) / 1e9));
  // A decoder layer recomputed in backward runs its forward again: 2·n_layer + 4·NH·HD·T per
  // token, n_layer = 2·32 norms + 32·32 q + 2·16·32 k, v + 32·32 o + 3·64·32 MLP = 9280, so
  // 18560 + 2048 = 20608; the evaluation is unchanged.
  s = SmallTraining();
  s.recomputed_layers = 1;
  REQUIRE(layer_parameter_count(s.config) == 9280);
  const double layer_forward = 20608;
  TimeEstimate recomputed = estimate_training_time(s);
  CHECK(Term(recomputed, "compute")->seconds == doctest::Approx(10 * 64 * (f + layer_forward) / 1e9));
  CHECK(Term(recomputed, "compute")->how.find("(1 of 2 layers recomputed in backward)") != std::string::npos);
  CHECK(Term(recomputed, "evaluation")->seconds == doctest::Approx(128 * f / 3 / 1e9));
}

TEST_CASE("time estimate: the link probe before the first step, its sizes ended by its budget as the probe ends") {
  TrainingTimeShape s = SmallTraining();
  CHECK_FALSE(Term(estimate_training_time(s), "link probe"));  // none asked for
  // 2 ranks at 6.25 MB/s (50 Mbit/s): per size 6 all-reduces of S bytes per link (2(n−1)/n = 1).
  s.network_bytes_per_second = 6.25e6;
  s.network = "50 Mbit/s";
  s.probe_ranks = 2;
  s.probe_sizes = {4 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20};
  const TimeEstimate e = estimate_training_time(s);
  const double through_4m = 6 * (4096.0 + 262144 + 1048576 + 4194304) / 6.25e6;  // 5.29 s; 16 MiB would add 16.1 s
  REQUIRE(Term(e, "link probe"));
  CHECK(Term(e, "link probe")->seconds == doctest::Approx(through_4m));
  CHECK(Term(e, "link probe")->counted);
  CHECK(Term(e, "link probe")->how == "all-reduces of 4.1 kB..4.2 MB over 2 ranks, 6 each, at 50 Mbit/s (its 10 s budget)");
  TrainingTimeShape no_probe = s;
  no_probe.probe_sizes.clear();
  CHECK(e.seconds == doctest::Approx(estimate_training_time(no_probe).seconds + through_4m));
  // 4 ranks: 2(n−1)/n = 1.5 times the bytes per link; a fast link measures every size.
  s.probe_ranks = 4;
  s.network_bytes_per_second = 1.25e9;
  CHECK(Term(estimate_training_time(s), "link probe")->seconds ==
        doctest::Approx(6 * 1.5 * (4096.0 + 262144 + 1048576 + 4194304 + 16777216) / 1.25e9));
  // Its network's rate unknown: not counted.
  s.network_bytes_per_second = 0;
  CHECK(Term(estimate_training_time(s), "link probe")->seconds == 0);
}

TEST_CASE("time estimate: inference decode is memory-bound (weights + KV cache per token over bandwidth)") {
  InferenceTimeShape s;
  s.config = Small();
  s.max_new_tokens = {10, 20};
  s.prompt_tokens = 5;
  s.weight_bytes = 80000;
  s.dtype_bytes = 4;
  s.device.flops_per_device = 1e9;
  s.device.mfu = 0.5;
  s.device.memory_bytes_per_second = 1e6;
  s.device.memory_efficiency = 1;
  s.device.op_seconds = 1e-6;
  TimeEstimate e = estimate_inference_time(s);
  // KV bytes per position: 2 · L · NKV · HD · e = 2·2·2·8·4 = 256; a request of n tokens reads at its
  // mean position prompt + n/2: (80000 + 256·10)/1e6 s x 10 tokens + (80000 + 256·15)/1e6 x 20.
  const double decode = 10 * (80000 + 2560) / 1e6 + 20 * (80000 + 3840) / 1e6;
  CHECK(Term(e, "decode")->seconds == doctest::Approx(decode));
  // Prefill: 5 prompt tokens x 2·(N − N_emb) at peak x MFU, per request.
  CHECK(Term(e, "prefill")->seconds == doctest::Approx(2 * 5 * 2 * 18912 / 5e8));
  CHECK(e.seconds == doctest::Approx(decode + 2 * 5 * 2 * 18912 / 5e8));
  // Two replicas on one CPU host: the schedule is split, the bandwidth shared: the same decode time.
  s.replicas = 2;
  s.replicas_sharing_memory = 2;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(decode));
  // Two replicas with their own memory: half.
  s.replicas_sharing_memory = 1;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(decode / 2));
  // With the position on the device (decode_step device), each token attends to its request's
  // whole decode bucket: 5 + 10 and 5 + 20 positions round up to the context's 64.
  s.replicas_sharing_memory = 1;
  s.replicas = 1;
  s.decode_step = DecodeStepChoice::kDevice;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds ==
        doctest::Approx(30 * (80000 + 256 * 64) / 1e6));
  CHECK(Term(estimate_inference_time(s), "decode")->how.find("the KV cache of its request's whole decode bucket "
                                                             "(decode_step device)") != std::string::npos);
  // The fused ops at the device's position attend over the positions filled so far, as the host's.
  s.fused_decode_ops = true;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(decode));
  CHECK(Term(estimate_inference_time(s), "decode")->how.find(
            "the KV cache so far (decode_step device: the fused ops at the device's position)") != std::string::npos);
  s.fused_decode_ops = false;
  s.decode_step = DecodeStepChoice::kHost;
  // A fast memory: the op floor bounds every token, (61·L + 20) ops of 1 µs for the composite
  // decode layer, (10·L + 13) with the fused ops of a float32 model on a CPU.
  s.device.memory_bytes_per_second = 1e12;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 142e-6));
  s.fused_decode_ops = true;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 33e-6));
  CHECK(Term(estimate_inference_time(s), "decode")->how.find("(33 ops), which bounds every token") !=
        std::string::npos);
  // A 4-bit model on a CPU: the fused ops over seven projections dequantized on use, (43·L + 13).
  s.nf4 = true;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 99e-6));
  // The step at the device's position: the same layers, (43·L + 15) for the 4-bit model, (10·L + 15)
  // in float32, (61·L + 25) composite.
  s.decode_step = DecodeStepChoice::kDevice;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 101e-6));
  s.nf4 = false;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 35e-6));
  s.fused_decode_ops = false;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 147e-6));
  // Replayed from a CUDA graph: the same eager floor, said to be an upper bound.
  s.decode_step = DecodeStepChoice::kGraph;
  CHECK(Term(estimate_inference_time(s), "decode")->seconds == doctest::Approx(30 * 147e-6));
  CHECK(Term(estimate_inference_time(s), "decode")->how.find(
            "(147 ops, dispatched eagerly: a replayed CUDA graph's cost is not modeled, an upper bound)") !=
        std::string::npos);
}

namespace {

Plan ParseOk(const std::string& text) {
  PlanParseResult r = ParsePlanString(text, "<string>");
  std::string errors;
  for (const auto& d : r.errors) errors += d.ToString() + "\n";
  INFO(errors);
  REQUIRE(r.ok());
  return *r.plan;
}

const char* kRigPlan =
    "protocol: 1\nname: t\nmodels:\n  m: {preset: llama2-7b, init: random}\n"
    "datasets:\n  d: {format: text, path: /nonexistent/d.txt}\n"
    "cluster:\n  network: 10G\n  nodes:\n"
    "    - {name: rig0, host: rig0, gpus: 8, gpu_memory_gb: 80, gpu_model: H100 SXM}\n"
    "    - {name: rig1, host: rig1, gpus: 8, gpu_memory_gb: 80, gpu_model: H100 SXM, gpu_mfu: 0.2}\n"
    "stages:\n  - name: s\n    cases:\n"
    "      - {id: one, backend: fsdp, workload: pretrain, model: m, dataset: d, nodes: 1, steps: 100,\n"
    "         training: {batch_size: 16, seq_len: 128}}\n"
    "      - {id: two, backend: fsdp, workload: pretrain, model: m, dataset: d, nodes: 2, steps: 100,\n"
    "         network: 80G, training: {batch_size: 16, seq_len: 128}}\n"
    "      - {id: ep, backend: fsdp, workload: pretrain, model: m, dataset: d, nodes: 1, epochs: 1}\n";

}  // namespace

TEST_CASE("time estimate: a training rank's set-up reads a dataset and meets its peers; an inference rank's does not") {
  TrainingTimeShape t = SmallTraining();
  t.load_bytes = 0;
  t.device.rank_setup_seconds = kAssumedCpuRankSetupSeconds;
  t.device.inference_rank_setup_seconds = kAssumedCpuInferenceRankSetupSeconds;
  CHECK(Term(estimate_training_time(t), "start-up")->seconds == doctest::Approx(0.5 + kAssumedCpuRankSetupSeconds));
  InferenceTimeShape s;
  s.config = Small();
  s.max_new_tokens = {10};
  s.prompt_tokens = 5;
  s.weight_bytes = 80000;
  s.dtype_bytes = 4;
  s.device = t.device;
  s.device.memory_bytes_per_second = 1e6;
  s.rank_processes = 1;
  const TimeEstimate e = estimate_inference_time(s);
  const TimeTerm* start = Term(e, "start-up");
  REQUIRE(start != nullptr);
  CHECK(start->seconds == doctest::Approx(0.5 + kAssumedCpuInferenceRankSetupSeconds));
  INFO(start->how);
  CHECK(start->how.find("1 rank process(es) start 500 ms + set-up 50 ms") == 0);
  // In the runner's process: no start, no set-up.
  s.rank_processes = 0;
  CHECK(Term(estimate_inference_time(s), "start-up")->seconds == doctest::Approx(0));
}

TEST_CASE("time estimate: a plan's case on the device table's row, its gpu_mfu and its network label") {
  Plan plan = ParseOk(kRigPlan);
  const CaseSpec* one = plan.FindCase("one");
  TimeEstimate e = native_case_time(plan, *one, NativeRole::kFsdp, std::nullopt);
  INFO(e.why_not);
  REQUIRE(e.estimated());
  CHECK(e.nodes == 1);
  // 100 steps x 16 x 128 tokens x f(128) over 8 x 989 TFLOP/s x 0.40 (assumed MFU).
  auto config = PresetConfig("llama2-7b");
  const double f = config->TrainingFlopsPerToken(128);
  CHECK(Term(e, "compute")->seconds == doctest::Approx(100 * 16 * 128 * f / (8 * 989e12 * 0.40)));
  CHECK(e.device.find("8 x H100 SXM, datasheet bf16 989 TFLOP/s, MFU 0.40 (assumed)") == 0);
  // Two nodes: rig0 states no gpu_mfu, so the assumed one; the link is the case's 80G label, 10 GB/s.
  TimeEstimate two = native_case_time(plan, *plan.FindCase("two"), NativeRole::kFsdp, std::nullopt);
  REQUIRE(two.estimated());
  CHECK(two.nodes == 2);
  CHECK(Term(two, "communication")->how.find("per link between nodes at 10 GB/s (network: 80G)") !=
        std::string::npos);
  // A length in epochs is not estimated, and says why.
  TimeEstimate ep = native_case_time(plan, *plan.FindCase("ep"), NativeRole::kFsdp, std::nullopt);
  CHECK(ep.why_not == "a length in epochs: its steps depend on the dataset's size, which validate does not read");
  // gpu_mfu on the first node of a case is used; a node without gpu_model is not estimated.
  plan.cluster.nodes[0].gpu_mfu = 0.2;
  CHECK(Term(native_case_time(plan, *one, NativeRole::kFsdp, std::nullopt), "compute")->seconds ==
        doctest::Approx(Term(e, "compute")->seconds * 2));
  plan.cluster.nodes[0].gpu_model = "";
  CHECK(native_case_time(plan, *one, NativeRole::kFsdp, std::nullopt).why_not.find(
            "node 'rig0' does not say which GPU it has (cluster.nodes[].gpu_model: one of H100 PCIe") == 0);
  plan.cluster.nodes[0].gpu_model = "H100";
  CHECK(native_case_time(plan, *one, NativeRole::kFsdp, std::nullopt).why_not.find(
            "node 'rig0' has gpu_model 'H100', which the device table does not list") == 0);
}

TEST_CASE("time estimate: a CPU case uses this host's calibration when present, and says assumed otherwise") {
  Plan plan = ParseOk(
      "protocol: 1\nname: t\nmodels:\n  m: {preset: tiny, init: random}\n"
      "datasets:\n  d: {format: text, path: /nonexistent/d.txt}\n"
      "cluster:\n  nodes: [{name: n0, host: localhost}]\n"
      "stages:\n  - name: s\n    cases:\n"
      "      - {id: a, backend: fsdp, workload: pretrain, model: m, dataset: d, nodes: 1, steps: 12,\n"
      "         training: {batch_size: 8, seq_len: 64, device: cpu, threads: 2}}\n");
  const CaseSpec* a = plan.FindCase("a");
  TimeEstimate assumed = native_case_time(plan, *a, NativeRole::kFsdp, std::nullopt);
  REQUIRE(assumed.estimated());
  CHECK(assumed.device.find("assumed (no `protocol calibrate` figures for this host)") != std::string::npos);
  HostCalibration c;
  c.host = "localhost";
  c.measured_at = "2026-11-26T00:00:00Z";
  c.cpu_flops = 2 * kAssumedCpuGflops * 1e9;  // twice the assumed rate: half the compute
  c.memory_bytes_per_second = 1e10;
  c.threads = 2;
  TimeEstimate calibrated = native_case_time(plan, *a, NativeRole::kFsdp, c);
  REQUIRE(calibrated.estimated());
  CHECK(calibrated.device.find("calibrated on this host (localhost, 2026-11-26T00:00:00Z)") != std::string::npos);
  CHECK(calibrated.device.find("other processes took") == std::string::npos);
  // Measured on a busy machine: the estimate says so, and how to replace it.
  c.contention = 0.5;
  CHECK(native_case_time(plan, *a, NativeRole::kFsdp, c)
            .device.find("calibrated on this host (localhost, 2026-11-26T00:00:00Z), measured while other processes "
                         "took 50 % of the CPU: `protocol calibrate` on an idle machine replaces it") !=
        std::string::npos);
  c.contention = 0;
  CHECK(Term(calibrated, "compute")->seconds == doctest::Approx(Term(assumed, "compute")->seconds / 2));
  // The case uses 1 of the calibration's 4 threads: a quarter of its rate.
  c.threads = 4;
  plan.stages[0].cases[0].training.threads = 1;
  CHECK(Term(native_case_time(plan, *plan.FindCase("a"), NativeRole::kFsdp, c), "compute")->seconds ==
        doctest::Approx(Term(assumed, "compute")->seconds * 2));
}

TEST_CASE("time estimate: an inference case's decode step off the host's position, from the plan") {
  Plan plan = ParseOk(
      "protocol: 1\nname: t\nmodels:\n  m: {preset: tiny, init: random}\n"
      "cluster:\n  nodes: [{name: n0, host: localhost}]\n"
      "stages:\n  - name: s\n    cases:\n"
      "      - {id: i, backend: fsdp, workload: inference, model: m, nodes: 1,\n"
      "         training: {device: cpu, threads: 1},\n"
      "         inference: {prompt: 'Hello', max_new_tokens: [50, 300]}}\n");
  HostCalibration c;
  c.host = "localhost";
  c.measured_at = "2026-11-26T00:00:00Z";
  c.cpu_flops = 1e11;
  c.memory_bytes_per_second = 1e13;  // a fast memory: the op floor bounds every token
  c.threads = 1;
  c.op_seconds = 4e-6;
  const ModelConfig tiny = *PresetConfig("tiny");
  auto decode = [&](DecodeStepChoice step) {
    plan.stages[0].cases[0].inference.decode_step = step;
    TimeEstimate e = native_case_time(plan, *plan.FindCase("i"), NativeRole::kFsdp, c);
    REQUIRE(e.estimated());
    return *Term(e, "decode");
  };
  CHECK(decode(DecodeStepChoice::kHost).seconds == doctest::Approx(350 * 4e-6 * DecodeOpsPerToken(tiny, true)));
  // A CPU in float32: the fused ops at the device's position, 2 ops more a token.
  const TimeTerm device = decode(DecodeStepChoice::kDevice);
  CHECK(device.seconds == doctest::Approx(350 * 4e-6 * DecodeOpsPerToken(tiny, true, false, /*device_position=*/true)));
  CHECK(DecodeOpsPerToken(tiny, true, false, true) == DecodeOpsPerToken(tiny, true) + kDecodeOpsDevicePositionFused);
  CHECK(device.how.find("(decode_step device: the fused ops at the device's position)") != std::string::npos);
  // A GPU (bf16, the composite ops): the whole bucket read, and a graph's floor said to be an upper bound.
  Plan gpu = ParseOk(
      "protocol: 1\nname: t\nmodels:\n  m: {preset: llama2-7b, init: random}\n"
      "cluster:\n  nodes: [{name: n0, host: rig0, gpus: 1, gpu_memory_gb: 80, gpu_model: H100 SXM}]\n"
      "stages:\n  - name: s\n    cases:\n"
      "      - {id: i, backend: fsdp, workload: inference, model: m, nodes: 1,\n"
      "         inference: {prompt: 'Hello', max_new_tokens: [100], decode_step: graph}}\n");
  TimeEstimate graph = native_case_time(gpu, *gpu.FindCase("i"), NativeRole::kFsdp, std::nullopt);
  REQUIRE(graph.estimated());
  const std::string how = Term(graph, "decode")->how;
  CHECK(how.find("the KV cache of its request's whole decode bucket (decode_step graph)") != std::string::npos);
  CHECK(how.find("ops, dispatched eagerly: a replayed CUDA graph's cost is not modeled, an upper bound)") !=
        std::string::npos);
}

}  // namespace native
}  // namespace protocol
