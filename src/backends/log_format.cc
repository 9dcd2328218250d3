// The table of log formats and the one engine that walks it (contract in
// log_format.h; each format's lines are shown in docs/backends.md).
//
// A format is a list of line rules. A rule's `signature` says that a line is
// of its kind; its fields are then searched one by one, each a regex whose
// group 1 is the value, so keys may come in any order and any may be
// missing. The first rule whose signature matches reads the line.

#include "backends/log_format.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>

#include "runner/base/statistics.h"
#include "runner/base/text.h"
#include "runner/store/metric_table.h"

namespace protocol {
namespace {

// How a printed value becomes the canonical unit.
enum class Conversion {
  kNone,
  kMillisecondsToSeconds,
  kMebibytesToBytes,  // "memory: 12345" (MiB, as mmengine prints max_memory_allocated / 2^20)
  kGibibytesToBytes,  // "MaxMemAllocated=8.1GB" (DeepSpeed and XTuner divide by 2^30)
  kClockToSeconds,    // "0:01:23.45" (H:MM:SS.cc), as the Trainer's metrics block prints a runtime
};

// How the values of a per-step figure become one figure.
enum class Aggregate {
  kMedian,  // over the steps after warm-up
  kLast,    // the last logged (loss)
  kMax,     // the largest (peak memory)
};

// The canonical figures a format may store, in the order they are stored.
struct FigureSpec {
  const char* name;
  const char* unit;
  Aggregate per_step;  // for values read from step lines; one-off values are kept as printed
};
const FigureSpec kFigures[] = {
    // Training.
    {metric::kTgs, "tokens/s", Aggregate::kMedian},
    {metric::kTflops, "TFLOP/s", Aggregate::kMedian},
    {metric::kStepSeconds, "s", Aggregate::kMedian},
    {metric::kSamplesPerSecond, "samples/s", Aggregate::kMedian},
    {metric::kTokensPerSecond, "tokens/s", Aggregate::kMedian},
    {"forward_seconds", "s", Aggregate::kMedian},
    {"backward_seconds", "s", Aggregate::kMedian},
    {"optimizer_step_seconds", "s", Aggregate::kMedian},
    {metric::kFinalLoss, "", Aggregate::kLast},
    {"train_loss_mean", "", Aggregate::kLast},
    {metric::kEvalLoss, "", Aggregate::kLast},
    {"perplexity", "", Aggregate::kLast},
    {metric::kTrainRuntimeSeconds, "s", Aggregate::kLast},
    {"steps_per_second", "steps/s", Aggregate::kMedian},
    {metric::kPeakDeviceMemory, "bytes", Aggregate::kMax},
    // Inference.
    {metric::kRequestThroughput, "requests/s", Aggregate::kLast},
    {metric::kOutputTokensPerSecond, "tokens/s", Aggregate::kLast},
    {metric::kTotalTokensPerSecond, "tokens/s", Aggregate::kLast},
    {metric::kTtftMeanSeconds, "s", Aggregate::kLast},
    {"ttft_median_seconds", "s", Aggregate::kLast},
    {"ttft_p99_seconds", "s", Aggregate::kLast},
    {metric::kTpotMeanSeconds, "s", Aggregate::kLast},
    {"tpot_median_seconds", "s", Aggregate::kLast},
    {"tpot_p99_seconds", "s", Aggregate::kLast},
    {metric::kItlMeanSeconds, "s", Aggregate::kLast},
    {"itl_median_seconds", "s", Aggregate::kLast},
    {"itl_p99_seconds", "s", Aggregate::kLast},
    {metric::kLatencyMeanSeconds, "s", Aggregate::kLast},
    {"latency_p50_seconds", "s", Aggregate::kLast},
    {"latency_p90_seconds", "s", Aggregate::kLast},
    {"latency_p99_seconds", "s", Aggregate::kLast},
    {"latency_per_token_mean_seconds", "s", Aggregate::kLast},
    {"latency_per_output_token_mean_seconds", "s", Aggregate::kLast},
    {"prefill_latency_mean_seconds", "s", Aggregate::kLast},
    {"decode_token_latency_mean_seconds", "s", Aggregate::kLast},
    {"decode_total_latency_mean_seconds", "s", Aggregate::kLast},
    {"prefill_tokens_per_second", "tokens/s", Aggregate::kLast},
    {"decode_tokens_per_second", "tokens/s", Aggregate::kLast},
    {"benchmark_seconds", "s", Aggregate::kLast},
};

// One value of a line: the figure it is, a regex whose group 1 is the value
// text, and how the text becomes the figure's unit.
struct Field {
  const char* figure;
  const char* pattern;
  Conversion conversion = Conversion::kNone;
};

enum class LineKind {
  kStep,        // one line per step: a StepSample; its number from `step_pattern`, else 1, 2, 3 ...
  kStepDetail,  // per-step figures on a line of their own (no sample), of the step line before it
  kOnce,        // figures printed once; the last printed value is kept
};

struct LineRule {
  const char* signature;  // the line is of this kind when this regex is found in it
  LineKind kind;
  const char* step_pattern;  // kStep: group 1 is the step number; "" = the lines are counted
  std::vector<Field> fields;
};

struct LogFormat {
  const char* name;
  std::vector<LineRule> lines;
};

// A value token: up to the next blank, comma, quote, bar or closing brace.
#define VALUE "([^\\s,'\"|}]+)"
// A key at the start of the line or after a blank or comma ("time:" is not "data_time:").
#define KEY(k) "(?:^|[\\s,])" k

// The formats. Every pattern here is shown with its lines in docs/backends.md.
const std::vector<LogFormat> kFormats = {
    {"xtuner",
     {
         // mmengine (XTuner 0.x): Iter(train) [ 20/720]  lr: 2.0e-05  eta: ...  time: 2.8037
         //   data_time: 0.0107  memory: 31645  loss: 1.2342  tflops: 151.2  tokens_per_sec: 2401.9
         {"Iter\\(train\\)\\s*\\[\\s*\\d+\\s*/",
          LineKind::kStep,
          "Iter\\(train\\)\\s*\\[\\s*(\\d+)\\s*/",
          {{metric::kStepSeconds, KEY("time:\\s*") VALUE},
           {metric::kFinalLoss, KEY("loss:\\s*") VALUE},
           {metric::kTflops, KEY("tflops:\\s*") VALUE},
           // XTuner's ThroughputHook divides the tokens by the world size: per GPU.
           {metric::kTgs, KEY("tokens_per_sec:\\s*") VALUE},
           {metric::kPeakDeviceMemory, KEY("memory:\\s*") VALUE, Conversion::kMebibytesToBytes}}},
         // v1: ... Step 2/13 data_time: 0.0049 lr: 1e-05 time: 0.0515 text_tokens: 8192.0
         //   total_loss: 10.779, reduced_llm_loss: 10.779, max_memory: 10.32 GB ... tflops: 80.1
         //   tgs: 76934.8 e2e_tgs: 70512.3 (older v1: exp_tgs), neither of which is the step's TGS
         {"(?:^|\\s)Step\\s+\\d+\\s*/\\s*\\d+",
          LineKind::kStep,
          "(?:^|\\s)Step\\s+(\\d+)\\s*/",
          {{metric::kStepSeconds, KEY("time:\\s*") VALUE},
           {metric::kFinalLoss, KEY("total_loss:\\s*") VALUE},
           {metric::kTflops, KEY("tflops:\\s*") VALUE},
           {metric::kTgs, KEY("tgs:\\s*") VALUE},
           {metric::kPeakDeviceMemory, KEY("max_memory:\\s*") "([^\\s,]+)\\s*GB", Conversion::kGibibytesToBytes}}},
     }},
    {"internevo",
     {
         // tflops=189.3 step=10 loss=5.67 tgs (tokens/gpu/second)=3512.1 lr=... grad_norm={'0_default': 1.2}
         // (older versions join the same keys with commas)
         {"tgs \\(tokens/gpu/second\\)=",
          LineKind::kStep,
          KEY("step=(\\d+)"),
          {{metric::kTflops, KEY("tflops=") VALUE},
           {metric::kFinalLoss, KEY("loss=") VALUE},
           {metric::kTgs, "tgs \\(tokens/gpu/second\\)=" VALUE}}},
     }},
    {"deepspeed",
     {
         // epoch=0/micro_step=40/global_step=10, RunningAvgSamplesPerSec=12.1, CurrSamplesPerSec=12.4,
         //   MemAllocated=4.2GB, MaxMemAllocated=8.1GB
         {"global_step=\\d+, (?:RunningAvg|Curr)SamplesPerSec=",
          LineKind::kStep,
          "global_step=(\\d+)",
          {{metric::kSamplesPerSecond, "CurrSamplesPerSec=" VALUE},
           {metric::kPeakDeviceMemory, "MaxMemAllocated=([^\\s,]+)GB", Conversion::kGibibytesToBytes}}},
         // older: "0/40, RunningAvgSamplesPerSec=..., CurrSamplesPerSec=..., MemAllocated=...GB, ..."
         // and oldest "0/40, SamplesPerSec=12.1": epoch / micro step
         {"(?:^|\\s)\\d+/\\d+, (?:RunningAvg|Curr)?SamplesPerSec=",
          LineKind::kStep,
          "(?:^|\\s)\\d+/(\\d+), ",
          {{metric::kSamplesPerSecond, "(?:CurrSamplesPerSec|[\\s,]SamplesPerSec)=" VALUE},
           {metric::kPeakDeviceMemory, "MaxMemAllocated=([^\\s,]+)GB", Conversion::kGibibytesToBytes}}},
         // time (ms) | fwd: 101.2 | bwd: 202.4 | bwd_inner: ... | step: 15.6
         {"time \\(ms\\) \\| fwd: ",
          LineKind::kStepDetail,
          "",
          {{"forward_seconds", KEY("fwd:\\s*") VALUE, Conversion::kMillisecondsToSeconds},
           {"backward_seconds", KEY("bwd:\\s*") VALUE, Conversion::kMillisecondsToSeconds},
           {"optimizer_step_seconds", KEY("step:\\s*") VALUE, Conversion::kMillisecondsToSeconds}}},
     }},
    {"megatron",
     {
         // iteration 43/ 100 | consumed samples: 5504 | elapsed time per iteration (ms): 5444.9 |
         //   throughput per GPU (TFLOP/s/GPU): 239.8 | learning rate: 1.0E-05 | lm loss: 1.825991E+00 | ...
         {"(?:^|\\s)iteration\\s+\\d+\\s*/",
          LineKind::kStep,
          "iteration\\s+(\\d+)\\s*/",
          {{metric::kStepSeconds, "elapsed time per iteration \\(ms\\):\\s*" VALUE,
            Conversion::kMillisecondsToSeconds},
           {metric::kTflops, "throughput per GPU \\(TFLOP/s/GPU\\):\\s*" VALUE},
           {metric::kFinalLoss, "lm loss:\\s*" VALUE}}},
     }},
    {"hf-trainer",
     {
         // {'loss': 2.3101, 'grad_norm': 1.52, 'learning_rate': 1e-05, 'epoch': 0.5} (newer: '2.3101')
         {"\\{'loss': ", LineKind::kStep, "", {{metric::kFinalLoss, "\\{'loss': '?" VALUE}}},
         // {'train_runtime': 5421.3, 'train_samples_per_second': 7.4, 'train_steps_per_second': 0.92,
         //  'train_loss': 2.41, 'epoch': 1.0}
         {"'train_runtime': ",
          LineKind::kOnce,
          "",
          {{metric::kTrainRuntimeSeconds, "'train_runtime': '?" VALUE},
           {metric::kSamplesPerSecond, "'train_samples_per_second': '?" VALUE},
           {"steps_per_second", "'train_steps_per_second': '?" VALUE},
           {"train_loss_mean", "'train_loss': '?" VALUE}}},
         // ***** train metrics *****, then one "  key = value" line per figure
         {"^\\s*train_(?:runtime|samples_per_second|steps_per_second|loss)\\s*=",
          LineKind::kOnce,
          "",
          {{metric::kTrainRuntimeSeconds, "^\\s*train_runtime\\s*=\\s*(\\S+)", Conversion::kClockToSeconds},
           {metric::kSamplesPerSecond, "^\\s*train_samples_per_second\\s*=\\s*(\\S+)"},
           {"steps_per_second", "^\\s*train_steps_per_second\\s*=\\s*(\\S+)"},
           {"train_loss_mean", "^\\s*train_loss\\s*=\\s*(\\S+)"}}},
         // run_clm_no_trainer.py: epoch 0: perplexity: 25.31 eval_loss: 3.2311
         {"epoch \\d+: perplexity:",
          LineKind::kOnce,
          "",
          {{"perplexity", "perplexity:\\s*" VALUE}, {metric::kEvalLoss, "eval_loss:\\s*" VALUE}}},
     }},
    {"vllm-serving",
     {
         // The "Serving Benchmark Result" block: "Request throughput (req/s):   8.30", ...
         {"^\\s*(?:Request|Output|Total|Mean|Median|P99|Benchmark)[^:]*\\((?:req/s|tok/s|ms|s)\\):",
          LineKind::kOnce,
          "",
          {{metric::kRequestThroughput, "Request throughput \\(req/s\\):\\s*" VALUE},
           {metric::kOutputTokensPerSecond, "Output token throughput \\(tok/s\\):\\s*" VALUE},
           {metric::kTotalTokensPerSecond, "Total [Tt]oken throughput \\(tok/s\\):\\s*" VALUE},
           {"benchmark_seconds", "Benchmark duration \\(s\\):\\s*" VALUE},
           {metric::kTtftMeanSeconds, "Mean TTFT \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {"ttft_median_seconds", "Median TTFT \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {"ttft_p99_seconds", "P99 TTFT \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {metric::kTpotMeanSeconds, "Mean TPOT \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {"tpot_median_seconds", "Median TPOT \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {"tpot_p99_seconds", "P99 TPOT \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {metric::kItlMeanSeconds, "Mean ITL \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {"itl_median_seconds", "Median ITL \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds},
           {"itl_p99_seconds", "P99 ITL \\(ms\\):\\s*" VALUE, Conversion::kMillisecondsToSeconds}}},
     }},
    {"vllm-throughput",
     {
         // Throughput: 5.23 requests/s, 2345.67 total tokens/s, 1234.56 output tokens/s
         // (older: "Throughput: 5.23 requests/s, 2345.67 tokens/s", prompt and output tokens together)
         {"Throughput: \\S+ requests/s",
          LineKind::kOnce,
          "",
          {{metric::kRequestThroughput, "Throughput: " VALUE " requests/s"},
           {metric::kTotalTokensPerSecond, ", " VALUE " (?:total )?tokens/s"},
           {metric::kOutputTokensPerSecond, ", " VALUE " output tokens/s"}}},
     }},
    {"vllm-latency",
     {
         // Avg latency: 1.2345 seconds; 50% percentile latency: 1.2301 seconds
         {"(?:Avg|percentile) latency: ",
          LineKind::kOnce,
          "",
          {{metric::kLatencyMeanSeconds, "Avg latency: " VALUE " seconds"},
           {"latency_p50_seconds", "(?:^|\\s)50% percentile latency: " VALUE " seconds"},
           {"latency_p90_seconds", "(?:^|\\s)90% percentile latency: " VALUE " seconds"},
           {"latency_p99_seconds", "(?:^|\\s)99% percentile latency: " VALUE " seconds"}}},
     }},
    {"lightllm",
     {
         // Total time: 120.52 s / Throughput: 8.30 requests/s / Average latency: 12.31 s /
         // Average latency per token: 0.0251 s / Average latency per output token: 0.0612 s
         {"^\\s*(?:Total time|Throughput|Average latency[a-z ]*): ",
          LineKind::kOnce,
          "",
          {{"benchmark_seconds", "Total time: " VALUE " s\\b"},
           {metric::kRequestThroughput, "Throughput: " VALUE " requests/s"},
           {metric::kLatencyMeanSeconds, "Average latency: " VALUE " s\\b"},
           {"latency_per_token_mean_seconds", "Average latency per token: " VALUE " s\\b"},
           {"latency_per_output_token_mean_seconds", "Average latency per output token: " VALUE " s\\b"}}},
     }},
    {"tgi",
     {
         // text-generation-benchmark's tables (the Average column):
         // | Prefill        | 1          | 22.63 ms  | ...         (latency)
         // | Decode (token) | 1          | 12.65 ms  | ...
         // | Decode (total) | 1          | 1575.18 ms | ...
         // | Prefill        | 1          | 44.18 tokens/secs | ...  (throughput)
         // | Decode         | 1          | 79.06 tokens/secs | ...
         {"^\\s*\\|\\s*(?:Prefill|Decode)",
          LineKind::kOnce,
          "",
          {{"prefill_latency_mean_seconds", "^\\s*\\|\\s*Prefill\\s*\\|\\s*\\d+\\s*\\|\\s*([^\\s|]+) ms\\s*\\|",
            Conversion::kMillisecondsToSeconds},
           {"decode_token_latency_mean_seconds",
            "^\\s*\\|\\s*Decode \\(token\\)\\s*\\|\\s*\\d+\\s*\\|\\s*([^\\s|]+) ms\\s*\\|",
            Conversion::kMillisecondsToSeconds},
           {"decode_total_latency_mean_seconds",
            "^\\s*\\|\\s*Decode \\(total\\)\\s*\\|\\s*\\d+\\s*\\|\\s*([^\\s|]+) ms\\s*\\|",
            Conversion::kMillisecondsToSeconds},
           {"prefill_tokens_per_second",
            "^\\s*\\|\\s*Prefill\\s*\\|\\s*\\d+\\s*\\|\\s*([^\\s|]+) tokens/secs\\s*\\|"},
           {"decode_tokens_per_second",
            "^\\s*\\|\\s*Decode(?: \\(token\\))?\\s*\\|\\s*\\d+\\s*\\|\\s*([^\\s|]+) tokens/secs\\s*\\|"}}},
     }},
};

#undef KEY
#undef VALUE

const LogFormat* FindFormat(const std::string& name) {
  for (const LogFormat& f : kFormats)
    if (name == f.name) return &f;
  return nullptr;
}

// `text` with ANSI escape sequences removed (CSI "ESC [ params final", and
// two-byte "ESC x").
std::string StripAnsi(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] != '\x1b') {
      out += text[i];
      continue;
    }
    if (i + 1 < text.size() && text[i + 1] == '[') {
      i += 2;
      while (i < text.size() && !(text[i] >= 0x40 && text[i] <= 0x7e)) ++i;
    } else {
      ++i;
    }
  }
  return out;
}

// "1:02:03.45" → 3723.45, "83.4" → 83.4; nullopt for anything else.
std::optional<double> ClockSeconds(const std::string& text) {
  std::vector<std::string> parts = Split(text, ':');
  if (parts.size() > 3) return std::nullopt;
  double seconds = 0;
  for (const std::string& part : parts) {
    std::optional<double> v = ParseFiniteNumber(part);
    if (!v || *v < 0) return std::nullopt;
    seconds = seconds * 60 + *v;
  }
  return seconds;
}

std::optional<double> Convert(const std::string& text, Conversion conversion) {
  if (conversion == Conversion::kClockToSeconds) return ClockSeconds(text);
  std::optional<double> v = ParseFiniteNumber(text);
  if (!v) return std::nullopt;
  switch (conversion) {
    case Conversion::kMillisecondsToSeconds:
      return *v / 1000;
    case Conversion::kMebibytesToBytes:
      return *v * 1024 * 1024;
    case Conversion::kGibibytesToBytes:
      return *v * 1024 * 1024 * 1024;
    default:
      return v;
  }
}

}  // namespace

std::optional<double> ParseFiniteNumber(std::string_view text) {
  std::string t = Trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  double v = std::strtod(t.c_str(), &end);
  if (end != t.c_str() + t.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<int64_t> ParseWholeNumber(std::string_view text) {
  std::string t = Trim(text);
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  long long v = std::strtoll(t.c_str(), &end, 10);
  if (end != t.c_str() + t.size()) return std::nullopt;
  return static_cast<int64_t>(v);
}

std::vector<std::string> LogFormatNames() {
  std::vector<std::string> names;
  for (const LogFormat& f : kFormats) names.push_back(f.name);
  return names;
}

bool IsLogFormat(const std::string& name) { return FindFormat(name) != nullptr; }

std::vector<std::string> LogFormatFigures(const std::string& format) {
  std::vector<std::string> names;
  const LogFormat* f = FindFormat(format);
  if (!f) return names;
  for (const FigureSpec& spec : kFigures) {
    bool stored = false;
    for (const LineRule& rule : f->lines)
      for (const Field& field : rule.fields) stored = stored || std::string(field.figure) == spec.name;
    if (stored) names.push_back(spec.name);
  }
  return names;
}

namespace {

// What the reader has gathered of one figure.
struct FigureValues {
  std::vector<double> timed;        // per-step values after warm-up
  std::optional<double> last_step;  // the last per-step value (warm-up included)
  std::optional<double> largest;    // the largest per-step value (warm-up included)
  std::optional<double> once;       // the last one-off value
  int64_t first_timed_step = 0;  // the lowest and highest step number of `timed`
  int64_t last_timed_step = 0;
  int step_values = 0;  // per-step values read, warm-up included
  int malformed = 0;    // values that were not a finite number
  int cut = 0;          // values at the very end of a possibly cut last line
};

struct CompiledRule {
  const LineRule* rule;
  std::regex signature;
  std::optional<std::regex> step;
  std::vector<std::pair<const Field*, std::regex>> fields;
  int64_t lines_seen = 0;  // the count that numbers lines without a step number
};

}  // namespace

struct LogFormatReader::State {
  const LogFormat* format;
  int warmup_steps;
  std::vector<CompiledRule> rules;
  std::map<std::string, FigureValues> figures;
  std::optional<std::pair<std::string, double>> pending;  // the last line, not yet read, and its arrival
  std::optional<double> previous_step_at;
  std::optional<int64_t> last_step_number;  // the number of the last step line
  double started_at = 0;
  bool started = false;
  int step_lines = 0;
  int warmup_lines = 0;

  // Reads one line; `last` when the output stopped inside it (it may be cut).
  void Read(const std::string& line, double arrived, bool last, std::vector<StepSample>* steps);
  void ReadRule(CompiledRule& rule, const std::string& line, double arrived, bool last,
                std::vector<StepSample>* steps);
};

LogFormatReader::LogFormatReader(const std::string& format, int warmup_steps) : state_(std::make_unique<State>()) {
  state_->format = FindFormat(format);
  state_->warmup_steps = std::max(0, warmup_steps);
  for (const LineRule& rule : state_->format->lines) {
    CompiledRule c{&rule, std::regex(rule.signature), std::nullopt, {}};
    if (*rule.step_pattern) c.step = std::regex(rule.step_pattern);
    for (const Field& field : rule.fields) c.fields.push_back({&field, std::regex(field.pattern)});
    state_->rules.push_back(std::move(c));
  }
}

LogFormatReader::~LogFormatReader() = default;

std::vector<StepSample> LogFormatReader::Feed(std::string_view line, double now_seconds) {
  std::vector<StepSample> steps;
  if (!state_->started) {
    state_->started = true;
    state_->started_at = now_seconds;
  }
  // A progress bar redrawn with '\r' is one line per redraw.
  for (const std::string& part : Split(line, '\r')) {
    std::string clean = StripAnsi(part);
    if (Trim(clean).empty()) continue;
    if (state_->pending) state_->Read(state_->pending->first, state_->pending->second, false, &steps);
    state_->pending = std::make_pair(std::move(clean), now_seconds);
  }
  return steps;
}

std::vector<StepSample> LogFormatReader::Finish(bool ended_mid_line) {
  std::vector<StepSample> steps;
  if (state_->pending) state_->Read(state_->pending->first, state_->pending->second, ended_mid_line, &steps);
  state_->pending.reset();
  return steps;
}

void LogFormatReader::State::Read(const std::string& line, double arrived, bool last,
                                  std::vector<StepSample>* steps) {
  try {
    for (CompiledRule& rule : rules) {
      if (!std::regex_search(line, rule.signature)) continue;
      ReadRule(rule, line, arrived, last, steps);
      return;
    }
  } catch (const std::exception&) {
    // std::regex may throw error_complexity / error_stack on odd input: the
    // line is simply not read.
  }
}

void LogFormatReader::State::ReadRule(CompiledRule& rule, const std::string& line, double arrived, bool last,
                                      std::vector<StepSample>* steps) {
  const LineKind kind = rule.rule->kind;
  ++rule.lines_seen;
  int64_t step = kind == LineKind::kStepDetail ? last_step_number.value_or(rule.lines_seen) : rule.lines_seen;
  std::smatch match;
  if (rule.step && std::regex_search(line, match, *rule.step)) {
    std::optional<int64_t> printed = ParseWholeNumber(match[1].str());
    if (!printed) return;  // a cut step number: the line is not a step
    step = *printed;
  }
  const bool warmup = kind != LineKind::kOnce && warmup_steps > 0 && step <= warmup_steps;
  std::map<std::string, double> values;
  for (auto& [field, re] : rule.fields) {
    if (!std::regex_search(line, match, re)) continue;
    FigureValues& f = figures[field->figure];
    if (last && static_cast<size_t>(match.position(1) + match.length(1)) == line.size()) {
      ++f.cut;  // nothing after the value proves it whole
      continue;
    }
    std::optional<double> v = Convert(match[1].str(), field->conversion);
    if (!v) {
      ++f.malformed;
      continue;
    }
    values[field->figure] = *v;
    if (kind == LineKind::kOnce) {
      f.once = *v;
      continue;
    }
    ++f.step_values;
    f.last_step = *v;
    f.largest = f.largest ? std::max(*f.largest, *v) : *v;
    if (warmup) continue;
    f.first_timed_step = f.timed.empty() ? step : std::min(f.first_timed_step, step);
    f.last_timed_step = f.timed.empty() ? step : std::max(f.last_timed_step, step);
    f.timed.push_back(*v);
  }
  if (kind != LineKind::kStep) return;
  ++step_lines;
  if (warmup) ++warmup_lines;
  last_step_number = step;
  StepSample sample;
  sample.step = step;
  auto printed_seconds = values.find(metric::kStepSeconds);
  sample.seconds = printed_seconds != values.end() ? printed_seconds->second
                                                   : arrived - previous_step_at.value_or(started_at);
  previous_step_at = arrived;
  if (auto loss = values.find(metric::kFinalLoss); loss != values.end()) sample.loss = loss->second;
  steps->push_back(sample);
}

namespace {

// "; 2 malformed values skipped; 1 value cut at the end of the output", or "".
std::string SkippedNote(int malformed, int cut) {
  std::string note;
  if (malformed > 0) note += fmt::format("; {} malformed value{} skipped", malformed, malformed == 1 ? "" : "s");
  if (cut > 0) note += fmt::format("; {} value{} cut at the end of the output skipped", cut, cut == 1 ? "" : "s");
  return note;
}

// The figure of `values`, or nullopt when nothing was read; `method` says how.
std::optional<double> Aggregated(const FigureSpec& spec, const FigureValues& values, const std::string& format,
                                 int warmup_steps, std::string* method) {
  const std::string from = fmt::format("parsed from {} output", format);
  if (values.step_values == 0) {
    if (!values.once) return std::nullopt;
    *method = from + ", as printed";
    return values.once;
  }
  switch (spec.per_step) {
    case Aggregate::kLast:
      *method = fmt::format("{}, the last of {} logged values", from, values.step_values);
      return values.last_step;
    case Aggregate::kMax:
      *method = fmt::format("{}, the largest of {} step lines", from, values.step_values);
      return values.largest;
    case Aggregate::kMedian:
      break;
  }
  if (values.timed.empty()) return std::nullopt;  // every value was warm-up
  const auto [low, high] = std::minmax_element(values.timed.begin(), values.timed.end());
  *method = fmt::format("{}, median of {} steps{} (steps {}..{}; spread {}..{})", from, values.timed.size(),
                        warmup_steps > 0 ? " after warm-up" : "", values.first_timed_step, values.last_timed_step,
                        FormatFigure(*low), FormatFigure(*high));
  return Median(values.timed);
}

}  // namespace

std::vector<Measurement> LogFormatReader::Figures() const {
  std::vector<Measurement> out;
  for (const FigureSpec& spec : kFigures) {
    auto it = state_->figures.find(spec.name);
    if (it == state_->figures.end()) continue;
    std::string method;
    std::optional<double> value = Aggregated(spec, it->second, state_->format->name, state_->warmup_steps, &method);
    if (!value) continue;
    Measurement m;
    m.name = spec.name;
    m.value = value;
    const MetricRow* known = FindMetric(spec.name);  // a metric the table knows: its unit there
    m.unit = known ? known->unit : spec.unit;
    m.how = Provenance::kMeasured;
    m.method = method + SkippedNote(it->second.malformed, it->second.cut);
    out.push_back(std::move(m));
  }
  return out;
}

std::string LogFormatReader::Summary() const {
  int malformed = 0;
  int cut = 0;
  for (const auto& [_, f] : state_->figures) {
    malformed += f.malformed;
    cut += f.cut;
  }
  std::string text = fmt::format("{}: {} step line{}", state_->format->name, state_->step_lines,
                                 state_->step_lines == 1 ? "" : "s");
  if (state_->warmup_lines > 0) text += fmt::format(" ({} in warm-up)", state_->warmup_lines);
  return text + SkippedNote(malformed, cut);
}

}  // namespace protocol
