// The log formats (src/backends/log_format.h): each format on lines shaped as
// the system prints them, every version variant, the warm-up rule, and noise
// (progress bars redrawn with '\r', ANSI colours, several ranks' lines
// interleaved, a cut last line, malformed numbers). The sample logs under
// data/logs/ are those plans/log-formats.yaml prints with `cat`.

#include "backends/log_format.h"

#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include "runner/base/text.h"
#include "test_files.h"

using namespace protocol;

namespace {

struct ReadResult {
  std::vector<StepSample> steps;
  std::vector<Measurement> figures;
  std::string summary;

  const Measurement* Find(const std::string& name) const {
    for (const Measurement& m : figures)
      if (m.name == name) return &m;
    return nullptr;
  }
  // The figure's value; NaN when absent (so a CHECK against a number fails).
  double Value(const std::string& name) const {
    const Measurement* m = Find(name);
    return m && m->value ? *m->value : std::nan("");
  }
};

// Feeds `text` line by line (one second apart) and finishes.
ReadResult Read(const std::string& format, const std::string& text, int warmup_steps = 0) {
  LogFormatReader reader(format, warmup_steps);
  ReadResult out;
  double now = 100;
  for (const std::string& line : Split(text, '\n')) {
    for (const StepSample& s : reader.Feed(line, now)) out.steps.push_back(s);
    now += 1;
  }
  // The output stopped inside its last line when the text does not end with a line end.
  for (const StepSample& s : reader.Finish(!text.empty() && text.back() != '\n')) out.steps.push_back(s);
  out.figures = reader.Figures();
  out.summary = reader.Summary();
  return out;
}

std::string SampleLog(const std::string& name) {
  std::string text = protocol::testing::ReadTextFile(std::string(PROTOCOL_SOURCE_DIR) + "/data/logs/" + name);
  REQUIRE(!text.empty());
  return text;
}

constexpr double kMiB = 1024.0 * 1024.0;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const char* const kXtunerLine20 =
    "11/26 09:01:08 - mmengine - INFO - Iter(train) [20/50]  lr: 2.0000e-05  eta: 0:01:24  time: 2.8037  "
    "data_time: 0.0107  memory: 31645  loss: 1.5342  tflops: 151.2  tokens_per_sec: 2401.9";

}  // namespace

TEST_CASE("log format: the names are the table's, and a name outside it is not a format") {
  CHECK((LogFormatNames() == std::vector<std::string>{"xtuner", "internevo", "deepspeed", "megatron", "hf-trainer",
                                                      "vllm-serving", "vllm-throughput", "vllm-latency", "lightllm",
                                                      "tgi"}));
  CHECK(IsLogFormat("megatron"));
  CHECK_FALSE(IsLogFormat("Megatron"));
  CHECK_FALSE(IsLogFormat(""));
}

TEST_CASE("log format: docs/backends.md shows every format and names every figure it stores") {
  const std::string doc = protocol::testing::ReadTextFile(std::string(PROTOCOL_SOURCE_DIR) + "/docs/backends.md");
  REQUIRE(!doc.empty());
  for (const std::string& format : LogFormatNames()) {
    CAPTURE(format);
    CHECK(doc.find("#### `" + format + "`") != std::string::npos);
    REQUIRE(!LogFormatFigures(format).empty());
    for (const std::string& figure : LogFormatFigures(format)) {
      CAPTURE(figure);
      CHECK(doc.find("`" + figure + "`") != std::string::npos);
    }
  }
  CHECK((LogFormatFigures("megatron") ==
         std::vector<std::string>{metric::kTflops, metric::kStepSeconds, metric::kFinalLoss}));
  CHECK(LogFormatFigures("nemo").empty());
}

TEST_CASE("log format: numbers are finite numbers filling the text") {
  CHECK(ParseFiniteNumber(" 1.5e3 ") == 1500);
  CHECK_FALSE(ParseFiniteNumber("12abc").has_value());
  CHECK_FALSE(ParseFiniteNumber("nan").has_value());
  CHECK_FALSE(ParseFiniteNumber("inf").has_value());
  CHECK_FALSE(ParseFiniteNumber("").has_value());
  CHECK(ParseWholeNumber("42") == 42);
  CHECK_FALSE(ParseWholeNumber("4.2").has_value());
}

TEST_CASE("log format xtuner (mmengine): medians after warm-up by the printed step number") {
  ReadResult r = Read("xtuner", SampleLog("xtuner.log"), 10);
  // Steps 20..50 are timed; step 10 is warm-up.
  CHECK(r.Value(metric::kTgs) == doctest::Approx((2401.9 + 2404.7) / 2));
  CHECK(r.Value(metric::kTflops) == doctest::Approx((151.2 + 151.5) / 2));
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx((2.8002 + 2.8037) / 2));
  CHECK(r.Value(metric::kFinalLoss) == doctest::Approx(1.3011));
  CHECK(r.Value(metric::kPeakDeviceMemory) == doctest::Approx(31702 * kMiB));
  const Measurement* tgs = r.Find(metric::kTgs);
  REQUIRE(tgs);
  CHECK(tgs->unit == "tokens/s");
  CHECK(tgs->how == Provenance::kMeasured);
  CHECK(tgs->method == "parsed from xtuner output, median of 4 steps after warm-up (steps 20..50; spread 2389.1..2412.5)");
  CHECK(r.Find(metric::kFinalLoss)->method == "parsed from xtuner output, the last of 5 logged values");
  // Every step line is a step sample, warm-up included, its seconds as printed.
  REQUIRE(r.steps.size() == 5);
  CHECK(r.steps[0].step == 10);
  CHECK(r.steps[0].seconds == doctest::Approx(3.9012));
  CHECK(r.steps[4].step == 50);
  CHECK(r.steps[4].loss == doctest::Approx(1.3011));
  CHECK(r.summary == "xtuner: 5 step lines (1 in warm-up)");

  // Without warm-up the first step counts too: median of five.
  ReadResult all = Read("xtuner", SampleLog("xtuner.log"), 0);
  CHECK(all.Value(metric::kTgs) == doctest::Approx(2401.9));
  CHECK(all.Find(metric::kTgs)->method.find("median of 5 steps") != std::string::npos);
}

TEST_CASE("log format xtuner (mmengine): keys in any order, and a figure never printed is absent") {
  ReadResult r = Read("xtuner",
                      "Iter(train) [ 1/9]  tokens_per_sec: 2000.5  loss: 2.5  time: 3.0  lr: 1e-05\n"
                      "Iter(train) [ 2/9]  time: 2.0  lr: 1e-05  loss: 2.4  tokens_per_sec: 3000.5\nend\n");
  CHECK(r.Value(metric::kTgs) == doctest::Approx(2500.5));
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx(2.5));
  CHECK(r.Find(metric::kTflops) == nullptr);  // never printed: absent, not zero
  CHECK(r.Find(metric::kPeakDeviceMemory) == nullptr);
  // "data_time" is not "time".
  ReadResult d = Read("xtuner", "Iter(train) [ 1/9]  data_time: 9.5  loss: 2.5\nend\n");
  CHECK(d.Find(metric::kStepSeconds) == nullptr);
}

TEST_CASE("log format xtuner (v1): Step N/M lines; tgs is the step's, not e2e_tgs or exp_tgs") {
  const std::string text =
      "[XTuner][RANK 0][2025-05-01 10:00:00][INFO] Step 1/4 data_time: 0.0049 lr: 0.000010 time: 0.0912 "
      "text_tokens: 8192.0 total_loss: 10.912, reduced_llm_loss: 10.912, max_memory: 10.32 GB "
      "reserved_memory: 12.17 GB grad_norm: 5.123 tflops: 40.2 tgs: 45001.2 e2e_tgs: 45001.2\n"
      "[XTuner][RANK 0][2025-05-01 10:00:01][INFO] Step 2/4 data_time: 0.0041 lr: 0.000010 time: 0.0515 "
      "text_tokens: 8192.0 total_loss: 10.779, reduced_llm_loss: 10.779, max_memory: 10.41 GB "
      "reserved_memory: 12.17 GB grad_norm: 4.871 tflops: 80.1 tgs: 76934.8 e2e_tgs: 60968.0\n"
      // Older v1 prints exp_tgs.
      "[XTuner][RANK 0][2025-05-01 10:00:01][INFO] Step 3/4 data_time: 0.0040 lr: 0.000010 time: 0.0525 "
      "text_tokens: 8192.0 total_loss: 10.601, reduced_llm_loss: 10.601, max_memory: 10.41 GB "
      "reserved_memory: 12.17 GB grad_norm: 4.102 tflops: 78.3 tgs: 75001.0 exp_tgs: 65645.7\n"
      "[XTuner][RANK 0][2025-05-01 10:00:01][INFO] Step 4/4 data_time: 0.0042 lr: 0.000010 time: 0.0510 "
      "text_tokens: 8192.0 total_loss: 10.433, reduced_llm_loss: 10.433, max_memory: 10.40 GB "
      "reserved_memory: 12.17 GB grad_norm: 3.911 tflops: 80.5 tgs: 77310.2 exp_tgs: 68567.1\n";
  ReadResult r = Read("xtuner", text, 1);
  CHECK(r.Value(metric::kTgs) == doctest::Approx(76934.8));  // median of steps 2..4
  CHECK(r.Value(metric::kTflops) == doctest::Approx(80.1));
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx(0.0515));
  CHECK(r.Value(metric::kFinalLoss) == doctest::Approx(10.433));
  CHECK(r.Value(metric::kPeakDeviceMemory) == doctest::Approx(10.41 * kGiB));
  REQUIRE(r.steps.size() == 4);
  CHECK(r.steps[1].step == 2);
  CHECK(r.steps[1].seconds == doctest::Approx(0.0515));
}

TEST_CASE("log format internevo: spaces or commas between keys, grad_norm as a dict") {
  ReadResult r = Read("internevo", SampleLog("internevo.log"), 1);
  CHECK(r.Value(metric::kTgs) == doctest::Approx((3455.8 + 3462.3) / 2));
  CHECK(r.Value(metric::kTflops) == doctest::Approx((190.2 + 190.6) / 2));
  CHECK(r.Value(metric::kFinalLoss) == doctest::Approx(8.957));
  REQUIRE(r.steps.size() == 5);
  CHECK(r.steps[0].step == 1);
  CHECK(r.steps[0].loss == doctest::Approx(11.031));
  // No step time printed: a step's seconds are the time since the step line before (one second here).
  CHECK(r.steps[1].seconds == doctest::Approx(1.0));
  CHECK(r.Find(metric::kStepSeconds) == nullptr);

  ReadResult commas = Read("internevo",
                           "tflops=121.7,step=0,loss=11.031,tgs (tokens/gpu/second)=2210.4,lr=4e-06,"
                           "loss_scale=65536.0,grad_norm={'0_default': 21.13, '1_fp32': 0.0},micro_num=4\n"
                           "tflops=190.2,step=1,loss=10.412,tgs (tokens/gpu/second)=3455.8,lr=8e-06,"
                           "loss_scale=65536.0,grad_norm=15.02,micro_num=4\n");
  CHECK(commas.Value(metric::kTgs) == doctest::Approx((2210.4 + 3455.8) / 2));
  CHECK(commas.Value(metric::kFinalLoss) == doctest::Approx(10.412));  // loss, not loss_scale
  REQUIRE(commas.steps.size() == 2);
  CHECK(commas.steps[0].step == 0);
}

TEST_CASE("log format deepspeed: the throughput timer's lines, its older forms and the time breakdown") {
  ReadResult r = Read("deepspeed", SampleLog("deepspeed.log"), 10);
  CHECK(r.Value(metric::kSamplesPerSecond) == doctest::Approx(12.52));  // median of steps 20, 30, 40
  CHECK(r.Value(metric::kPeakDeviceMemory) == doctest::Approx(8.20 * kGiB));
  // The breakdown belongs to the step line before it: steps 20..40.
  CHECK(r.Value("forward_seconds") == doctest::Approx(0.099));
  CHECK(r.Value("backward_seconds") == doctest::Approx(0.1998));
  CHECK(r.Value("optimizer_step_seconds") == doctest::Approx(0.0152));
  CHECK(r.Find("forward_seconds")->method.find("steps 20..40") != std::string::npos);
  REQUIRE(r.steps.size() == 4);
  CHECK(r.steps[3].step == 40);

  ReadResult older = Read("deepspeed",
                          "0/40, RunningAvgSamplesPerSec=10.1, CurrSamplesPerSec=10.5, MemAllocated=4.2GB, "
                          "MaxMemAllocated=8.0GB\n"
                          "0/80, RunningAvgSamplesPerSec=10.6, CurrSamplesPerSec=11.5, MemAllocated=4.2GB, "
                          "MaxMemAllocated=8.1GB\n");
  CHECK(older.Value(metric::kSamplesPerSecond) == doctest::Approx(11.0));
  CHECK(older.Value(metric::kPeakDeviceMemory) == doctest::Approx(8.1 * kGiB));
  REQUIRE(older.steps.size() == 2);
  CHECK(older.steps[1].step == 80);

  ReadResult oldest =
      Read("deepspeed", "0/40, SamplesPerSec=9.5\n0/80, SamplesPerSec=10.5\n1/120, SamplesPerSec=11.5\nexit\n");
  CHECK(oldest.Value(metric::kSamplesPerSecond) == doctest::Approx(10.5));
  CHECK(oldest.steps.size() == 3);
}

TEST_CASE("log format megatron: elapsed ms per iteration, TFLOP/s per GPU and the lm loss") {
  ReadResult r = Read("megatron", SampleLog("megatron.log"), 10);
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx(5.4449));  // median of 5444.9, 5431.2, 5452.7 ms
  CHECK(r.Value(metric::kTflops) == doctest::Approx(239.8));
  CHECK(r.Value(metric::kFinalLoss) == doctest::Approx(1.825991));
  CHECK(r.Find(metric::kStepSeconds)->unit == "s");
  REQUIRE(r.steps.size() == 4);
  CHECK(r.steps[1].step == 20);
  CHECK(r.steps[1].seconds == doctest::Approx(5.4449));
  CHECK(r.steps[1].loss == doctest::Approx(1.925991));
}

TEST_CASE("log format hf-trainer: log dicts, the final dict (plain or quoted), the metrics block, no_trainer") {
  ReadResult r = Read("hf-trainer", SampleLog("hf-trainer.log"));
  CHECK(r.Value(metric::kFinalLoss) == doctest::Approx(1.9876));  // the last logged loss
  CHECK(r.Value("train_loss_mean") == doctest::Approx(2.0113));
  CHECK(r.Value(metric::kTrainRuntimeSeconds) == doctest::Approx(125.43));  // "0:02:05.43"
  CHECK(r.Value(metric::kSamplesPerSecond) == doctest::Approx(25.51));
  CHECK(r.Value("steps_per_second") == doctest::Approx(0.797));
  CHECK(r.Find(metric::kTrainRuntimeSeconds)->method == "parsed from hf-trainer output, as printed");
  CHECK(r.steps.size() == 4);  // one per log dict, numbered 1, 2, 3, 4

  ReadResult quoted = Read("hf-trainer",
                           "{'loss': '2.4512', 'grad_norm': '1.83', 'learning_rate': '1.9e-05', 'epoch': '0.1'}\n"
                           "{'train_runtime': '5421.3', 'train_samples_per_second': '7.4', "
                           "'train_steps_per_second': '0.92', 'train_loss': '2.41', 'epoch': '1.0'}\n");
  CHECK(quoted.Value(metric::kFinalLoss) == doctest::Approx(2.4512));
  CHECK(quoted.Value(metric::kTrainRuntimeSeconds) == doctest::Approx(5421.3));
  CHECK(quoted.Value(metric::kSamplesPerSecond) == doctest::Approx(7.4));

  ReadResult block = Read("hf-trainer",
                          "***** train metrics *****\n  train_runtime            = 1:02:03.45\n  train_samples = 10\n");
  CHECK(block.Value(metric::kTrainRuntimeSeconds) == doctest::Approx(3723.45));

  ReadResult no_trainer = Read("hf-trainer",
                               "epoch 0: perplexity: 25.31 eval_loss: 3.2311\nepoch 1: perplexity: 21.02 eval_loss: 3.0455\n"
                               "done\n");
  CHECK(no_trainer.Value("perplexity") == doctest::Approx(21.02));
  CHECK(no_trainer.Value(metric::kEvalLoss) == doctest::Approx(3.0455));
}

TEST_CASE("log format vllm-serving: the result block, ms to seconds, either case of 'Token'") {
  ReadResult r = Read("vllm-serving", SampleLog("vllm-serving.log"));
  CHECK(r.Value(metric::kRequestThroughput) == doctest::Approx(8.30));
  CHECK(r.Value(metric::kOutputTokensPerSecond) == doctest::Approx(1645.97));
  CHECK(r.Value(metric::kTotalTokensPerSecond) == doctest::Approx(3431.85));
  CHECK(r.Value(metric::kTtftMeanSeconds) == doctest::Approx(0.12045));
  CHECK(r.Value("ttft_median_seconds") == doctest::Approx(0.10012));
  CHECK(r.Value("ttft_p99_seconds") == doctest::Approx(0.40033));
  CHECK(r.Value(metric::kTpotMeanSeconds) == doctest::Approx(0.0352));
  CHECK(r.Value(metric::kItlMeanSeconds) == doctest::Approx(0.03488));
  CHECK(r.Value("itl_p99_seconds") == doctest::Approx(0.15076));
  CHECK(r.Value("benchmark_seconds") == doctest::Approx(120.5));
  CHECK(r.Find(metric::kRequestThroughput)->unit == "requests/s");
  CHECK(r.steps.empty());

  ReadResult lower = Read("vllm-serving", "Total token throughput (tok/s):          3000.5\nend\n");
  CHECK(lower.Value(metric::kTotalTokensPerSecond) == doctest::Approx(3000.5));
}

TEST_CASE("log format vllm-throughput: requests, total and output tokens per second; the older two-figure line") {
  ReadResult r = Read("vllm-throughput", SampleLog("vllm-throughput.log"));
  CHECK(r.Value(metric::kRequestThroughput) == doctest::Approx(5.23));
  CHECK(r.Value(metric::kTotalTokensPerSecond) == doctest::Approx(2345.67));
  CHECK(r.Value(metric::kOutputTokensPerSecond) == doctest::Approx(1234.56));

  ReadResult older = Read("vllm-throughput", "Throughput: 4.10 requests/s, 1987.20 tokens/s\n");
  CHECK(older.Value(metric::kRequestThroughput) == doctest::Approx(4.10));
  CHECK(older.Value(metric::kTotalTokensPerSecond) == doctest::Approx(1987.20));
  CHECK(older.Find(metric::kOutputTokensPerSecond) == nullptr);
}

TEST_CASE("log format vllm-latency: the average and its percentiles") {
  ReadResult r = Read("vllm-latency", SampleLog("vllm-latency.log"));
  CHECK(r.Value(metric::kLatencyMeanSeconds) == doctest::Approx(1.2345));
  CHECK(r.Value("latency_p50_seconds") == doctest::Approx(1.2301));
  CHECK(r.Value("latency_p90_seconds") == doctest::Approx(1.2602));
  CHECK(r.Value("latency_p99_seconds") == doctest::Approx(1.3105));
}

TEST_CASE("log format lightllm: total time, throughput and the three latencies") {
  ReadResult r = Read("lightllm", SampleLog("lightllm.log"));
  CHECK(r.Value("benchmark_seconds") == doctest::Approx(120.52));
  CHECK(r.Value(metric::kRequestThroughput) == doctest::Approx(8.30));
  CHECK(r.Value(metric::kLatencyMeanSeconds) == doctest::Approx(12.31));
  CHECK(r.Value("latency_per_token_mean_seconds") == doctest::Approx(0.0251));
  CHECK(r.Value("latency_per_output_token_mean_seconds") == doctest::Approx(0.0612));
}

TEST_CASE("log format tgi: the Average column of the latency and throughput tables") {
  ReadResult r = Read("tgi", SampleLog("tgi.log"));
  CHECK(r.Value("prefill_latency_mean_seconds") == doctest::Approx(0.02263));
  CHECK(r.Value("decode_token_latency_mean_seconds") == doctest::Approx(0.01265));
  CHECK(r.Value("decode_total_latency_mean_seconds") == doctest::Approx(1.60655));
  CHECK(r.Value("prefill_tokens_per_second") == doctest::Approx(44.18));
  CHECK(r.Value("decode_tokens_per_second") == doctest::Approx(79.06));
  CHECK(r.Find(metric::kRequestThroughput) == nullptr);
}

TEST_CASE("log format noise: '\\r' redraws, ANSI colours and several ranks' lines interleaved") {
  const std::string esc = "\x1b";
  const std::string text =
      // A progress bar redrawn with '\r' before the step line, all in one line.
      " 10%|#         | 10/100\r 20%|##        | 20/100\r" + std::string(kXtunerLine20) + "\n" +
      // ANSI colours around the level and inside the figures.
      "11/26 09:01:36 - mmengine - " + esc + "[4m" + esc + "[97mINFO" + esc + "[0m - Iter(train) [30/50]  time: " +
      esc + "[32m2.7911" + esc + "[0m  tflops: 152.0  tokens_per_sec: 2412.5\n" +
      // Two ranks print the same step.
      "[rank1]: Iter(train) [40/50]  time: 2.8150  tflops: 150.4  tokens_per_sec: 2389.1\n" +
      "[rank0]: Iter(train) [40/50]  time: 2.8152  tflops: 150.6  tokens_per_sec: 2390.1\n" + "done\n";
  ReadResult r = Read("xtuner", text, 10);
  REQUIRE(r.steps.size() == 4);
  CHECK(r.Value(metric::kTgs) == doctest::Approx((2390.1 + 2401.9) / 2));  // 2389.1 2390.1 2401.9 2412.5
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx((2.8037 + 2.8150) / 2));
  CHECK(r.Find(metric::kTgs)->method.find("median of 4 steps") != std::string::npos);
}

TEST_CASE("log format: a cut last line neither crashes nor gives a bogus figure") {
  // The last line stops inside "tflops: 150.4": the value at its very end is not read.
  ReadResult r = Read("xtuner", std::string(kXtunerLine20) + "\nIter(train) [30/50]  time: 2.7911  tflops: 15", 0);
  CHECK(r.Value(metric::kTflops) == doctest::Approx(151.2));
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx((2.8037 + 2.7911) / 2));  // whole: a blank follows it
  CHECK(r.Find(metric::kTflops)->method.find("1 value cut at the end of the output skipped") != std::string::npos);
  CHECK(r.summary == "xtuner: 2 step lines; 1 value cut at the end of the output skipped");
  // Cut inside the step number, or inside a signature: not a step.
  CHECK(Read("xtuner", std::string(kXtunerLine20) + "\nIter(train) [3").steps.size() == 1);
  CHECK(Read("megatron", " iteration       1").steps.empty());
  // A one-off figure cut at the end: absent.
  CHECK(Read("lightllm", "Throughput: 8.30 requests/s\nAverage latency: 12.3").Find(metric::kLatencyMeanSeconds) ==
        nullptr);
  // The same value on a line that is followed by another is whole.
  CHECK(Read("xtuner", "Iter(train) [30/50]  tflops: 15\nnext\n").Value(metric::kTflops) == 15);
  // And so it is on a last line that ended: nothing after the value but the line end.
  ReadResult whole = Read("xtuner", std::string(kXtunerLine20) + "\nIter(train) [30/50]  time: 2.7911  tflops: 15\n");
  CHECK(whole.Value(metric::kTflops) == doctest::Approx((151.2 + 15) / 2));
  CHECK(whole.summary == "xtuner: 2 step lines");
}

TEST_CASE("log format: a malformed value is skipped and counted") {
  ReadResult r = Read("megatron",
                      " iteration 1/ 3 | elapsed time per iteration (ms): 5444.9 | throughput per GPU (TFLOP/s/GPU): "
                      "nan | lm loss: 1.9E+00 |\n"
                      " iteration 2/ 3 | elapsed time per iteration (ms): 54x4.9 | throughput per GPU (TFLOP/s/GPU): "
                      "239.8 | lm loss: 1.8E+00 |\n"
                      " iteration 3/ 3 | elapsed time per iteration (ms): 5400.1 | throughput per GPU (TFLOP/s/GPU): "
                      "239.6 | lm loss: 1.7E+00 |\n");
  CHECK(r.Value(metric::kTflops) == doctest::Approx((239.8 + 239.6) / 2));
  CHECK(r.Find(metric::kTflops)->method ==
        "parsed from megatron output, median of 2 steps (steps 2..3; spread 239.6..239.8); "
        "1 malformed value skipped");
  CHECK(r.Value(metric::kStepSeconds) == doctest::Approx((5.4449 + 5.4001) / 2));
  CHECK(r.summary == "megatron: 3 step lines; 2 malformed values skipped");
}

TEST_CASE("log format: every step in warm-up leaves the medians absent, the samples and the last loss stored") {
  ReadResult r = Read("megatron", SampleLog("megatron.log"), 40);
  CHECK(r.Find(metric::kTflops) == nullptr);
  CHECK(r.Find(metric::kStepSeconds) == nullptr);
  CHECK(r.Value(metric::kFinalLoss) == doctest::Approx(1.825991));
  CHECK(r.steps.size() == 4);
  CHECK(r.summary == "megatron: 4 step lines (4 in warm-up)");
}

TEST_CASE("log format: a line of another format gives nothing") {
  CHECK(Read("megatron", SampleLog("xtuner.log")).figures.empty());
  CHECK(Read("xtuner", SampleLog("megatron.log")).figures.empty());
  CHECK(Read("tgi", SampleLog("vllm-serving.log")).figures.empty());
  CHECK(Read("vllm-serving", SampleLog("lightllm.log")).figures.empty());
}
