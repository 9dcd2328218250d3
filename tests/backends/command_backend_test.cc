// The command backend: placeholders, quoting, outcomes, metrics and steps.
// Real /bin/sh children where the shell matters (injection), a fake
// ProcessRunner where only the mapping of results matters.

#include <doctest/doctest.h>
#include <signal.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "backends/command_backend.h"
#include "fake_process_runner.h"
#include "test_files.h"
#include "runner/base/text.h"
#include "runner/plan/case_placeholders.h"

using namespace protocol;
using protocol::testing::CapturingProcessRunner;
using protocol::testing::FakeProcessRunner;

namespace {

class RecordingEvents : public CaseEvents {
 public:
  void OnStep(const StepSample& step) override { steps.push_back(step); }
  void OnRequest(const RequestSample& request) override { requests.push_back(request); }
  void OnStatusLine(const std::string& text) override { status_lines.push_back(text); }
  std::vector<StepSample> steps;
  std::vector<RequestSample> requests;
  std::vector<std::string> status_lines;
};

// Returns the scripted times, one per call (the last one repeats).
class ScriptedClock : public Clock {
 public:
  explicit ScriptedClock(std::vector<double> times) : times_(std::move(times)) {}
  double NowSeconds() override {
    double t = times_[std::min(next_, times_.size() - 1)];
    ++next_;
    return t;
  }
  std::string NowIso8601() override { return "2026-01-02T03:04:05Z"; }

 private:
  std::vector<double> times_;
  size_t next_ = 0;
};

// A plan with one model and one dataset, and a pretrain case for the command backend.
struct Fixture {
  Fixture() {
    REQUIRE(!temp.path.empty());
    dir = temp.str();
    plan.file = dir + "/plans/smoke.yaml";
    plan.name = "smoke";
    plan.models["llama2-7b"] = ModelSpec{"llama2-7b", "llama2-7b", "/models/Llama 2 7b", Quantization::kNone, false, false, "", {}};
    plan.datasets["dolly"] = DatasetSpec{"dolly", "dolly", "/data/dolly 15k.jsonl", {}, {}};
    spec.id = "2.1.2.1";
    spec.stage = "stage2";
    spec.backend = "command";
    spec.system = "fsdp";
    spec.model = "llama2-7b";
    spec.dataset = "dolly";
    spec.nodes = 2;
    spec.topology.parts = {{"rig0", 4, 2}, {"rig1", 4, 2}};
    spec.network = "10G";
    spec.length = Length{Length::Unit::kSteps, 1000};
    spec.inference.prompt = "Can there be life?";
    spec.inference.max_new_tokens = {100, 110, 120};
  }

  BackendOutcome Run(ProcessRunner& runner, Clock& clock) {
    BackendContext context{plan,   spec, 1,      dir + "/logs/case.log", dir + "/out/2.1.2.1",
                           stop,   runner, clock, events, 7};
    return MakeCommandBackend()->Run(context);
  }
  BackendOutcome Run() {
    auto runner = MakeSystemProcessRunner();
    return Run(*runner, SystemClock());
  }
  std::vector<std::string> Check() { return MakeCommandBackend()->Check(plan, spec); }

  protocol::testing::TempDir temp{"command"};
  std::string dir;
  Plan plan;
  CaseSpec spec;
  StopFlag stop;
  RecordingEvents events;
};

// argv of a script that prints "argc=$#" and then "arg=[...]" for each argument.
std::vector<std::string> PrintArgs() {
  return {"/bin/sh", "-c", "printf '%s\\n' \"argc=$#\"; for a in \"$@\"; do printf 'arg=[%s]\\n' \"$a\"; done",
          "sh"};
}

}  // namespace

TEST_CASE("Command: exit 0 is ok with exit code 0 and exit 3 is a failure 'exit code 3'") {
  Fixture f;
  f.spec.command.argv = {"/bin/sh", "-c", "exit 0"};
  BackendOutcome ok = f.Run();
  CHECK(ok.status == CaseStatus::kOk);
  CHECK(ok.reason == "");
  CHECK(ok.exit_code == 0);

  f.spec.command.argv = {"/bin/sh", "-c", "echo failing; exit 3"};
  BackendOutcome failed = f.Run();
  CHECK(failed.status == CaseStatus::kFailed);
  CHECK(failed.reason == "exit code 3");
  CHECK(failed.exit_code == 3);
}

TEST_CASE("Command: a signal or timeout or stop or failed start becomes a status with a reason") {
  Fixture f;
  f.spec.command.argv = {"/bin/sh", "-c", "kill -9 $$"};
  BackendOutcome killed = f.Run();
  CHECK(killed.status == CaseStatus::kFailed);
  CHECK(killed.reason == "killed by signal 9 (SIGKILL)");
  CHECK_FALSE(killed.exit_code.has_value());

  f.spec.command.argv = {"sleep", "30"};
  f.spec.timeout_seconds = 0.2;
  BackendOutcome timed_out = f.Run();
  CHECK(timed_out.status == CaseStatus::kTimeout);
  CHECK(timed_out.reason == "timed out after 0.2 s; process group killed");

  f.spec.timeout_seconds = 0;
  f.stop.Request();
  BackendOutcome stopped = f.Run();
  CHECK(stopped.status == CaseStatus::kInterrupted);
  CHECK(stopped.reason == "stopped by request (Ctrl-C / SIGTERM); process group killed");
  f.stop.Reset();

  f.spec.command.argv = {"fdsp", "--nodes", "{nodes}"};
  BackendOutcome missing = f.Run();
  CHECK(missing.status == CaseStatus::kFailed);
  CHECK(missing.reason == "cannot run 'fdsp': No such file or directory");
  CHECK_FALSE(missing.exit_code.has_value());
}

TEST_CASE("Command: outcome mapping of every process ending (fake runner)") {
  Fixture f;
  f.spec.command.argv = {"train"};
  f.spec.timeout_seconds = 60;
  FakeProcessRunner runner;
  ScriptedClock clock({0});

  runner.result.ending = ProcessResult::Ending::kTimedOut;
  CHECK(f.Run(runner, clock).reason == "timed out after 60 s; process group killed");
  CHECK(runner.seen.timeout_seconds == 60);
  CHECK(runner.seen.log_path == f.dir + "/logs/case.log");

  runner.result.ending = ProcessResult::Ending::kSignaled;
  runner.result.signal = 63;
  CHECK(f.Run(runner, clock).reason == "killed by signal 63");
  runner.result.signal = SIGSEGV;
  CHECK(f.Run(runner, clock).reason == "killed by signal 11 (SIGSEGV)");

  runner.result.ending = ProcessResult::Ending::kFailedToStart;
  runner.result.error = "cannot change directory to '/x': No such file or directory";
  BackendOutcome bad_dir = f.Run(runner, clock);
  CHECK(bad_dir.status == CaseStatus::kFailed);
  CHECK(bad_dir.reason == "cannot change directory to '/x': No such file or directory");
}

TEST_CASE("Command: every placeholder expands inside its own argv element") {
  Fixture f;
  const std::map<std::string, std::string> value = {
      {"case_id", "2.1.2.1"},
      {"repeat", "1"},
      {"model", "llama2-7b"},
      {"model_path", "/models/Llama 2 7b"},
      {"dataset", "dolly"},
      {"dataset_path", "/data/dolly 15k.jsonl"},
      {"output_dir", f.dir + "/out/2.1.2.1"},
      {"steps", "1000"},
      {"epochs", ""},
      {"nodes", "2"},
      {"topology", "rig0:4x2 rig1:4x2"},
      {"network", "10G"},
      {"prompt", "Can there be life?"},
      {"max_new_tokens", "100,110,120"},
      {"plan_dir", f.dir + "/plans"},
      {"plan", "smoke"},
      {"stage", "stage2"},
      {"run_id", "7"},
  };
  // Every row of the placeholder table (case_placeholders.h), each in its own element.
  f.spec.command.argv = PrintArgs();
  std::vector<std::string> expected = {fmt::format("argc={}", CasePlaceholders().size() + 1)};
  for (const CasePlaceholder& p : CasePlaceholders()) {
    f.spec.command.argv.push_back(std::string(p.name) + "={" + p.name + "}");
    REQUIRE_MESSAGE(value.count(p.name) == 1, p.name);
    expected.push_back(fmt::format("arg=[{}={}]", p.name, value.at(p.name)));
  }
  f.spec.command.argv.push_back("{{literal}}");
  expected.push_back("arg=[{literal}]");
  REQUIRE(f.Check().empty());
  CapturingProcessRunner runner;
  BackendOutcome outcome = f.Run(runner, SystemClock());
  REQUIRE(outcome.status == CaseStatus::kOk);
  CHECK(runner.lines == expected);

  f.spec.length = Length{Length::Unit::kEpochs, 1};
  f.spec.command.argv = {"/bin/sh", "-c", "echo \"[$1][$2]\"", "sh", "{steps}", "{epochs}"};
  runner.lines.clear();
  f.Run(runner, SystemClock());
  CHECK(runner.lines == std::vector<std::string>{"[][1]"});
}

TEST_CASE("Command: env values and workdir are expanded and applied") {
  Fixture f;
  std::filesystem::create_directories(f.dir + "/work/2.1.2.1");
  f.spec.command.argv = {"/bin/sh", "-c", "pwd; echo \"$MODEL_DIR|$CASE\""};
  f.spec.command.env = {{"MODEL_DIR", "{model_path}"}, {"CASE", "case {case_id}"}};
  f.spec.command.workdir = f.dir + "/work/{case_id}";
  CapturingProcessRunner runner;
  BackendOutcome outcome = f.Run(runner, SystemClock());
  CHECK(outcome.status == CaseStatus::kOk);
  CHECK(runner.lines ==
        std::vector<std::string>{f.dir + "/work/2.1.2.1", "/models/Llama 2 7b|case 2.1.2.1"});
}

TEST_CASE("Command: a hostile prompt arrives as one argument byte for byte without a shell") {
  Fixture f;
  for (const std::string& prompt : {std::string("\"; touch injected; echo \""),
                                    std::string("$(touch pwned) `touch pwned2` it's \\ *")}) {
    f.spec.inference.prompt = prompt;
    f.spec.command.argv = PrintArgs();
    f.spec.command.argv.push_back("{prompt}");
    f.spec.command.workdir = f.dir;
    CapturingProcessRunner runner;
    REQUIRE(f.Run(runner, SystemClock()).status == CaseStatus::kOk);
    CHECK(runner.lines == std::vector<std::string>{"argc=1", "arg=[" + prompt + "]"});
    CHECK(runner.seen.argv.back() == prompt);
  }
  CHECK_FALSE(std::filesystem::exists(f.dir + "/injected"));
  CHECK_FALSE(std::filesystem::exists(f.dir + "/pwned"));
  CHECK_FALSE(std::filesystem::exists(f.dir + "/pwned2"));
}

TEST_CASE("Command: with shell: true a hostile prompt is quoted and stays one word") {
  Fixture f;
  for (const std::string& prompt : {std::string("\"; touch injected; echo \""),
                                    std::string("$(touch pwned) `touch pwned2` it's \\ * '' \n2nd")}) {
    f.spec.inference.prompt = prompt;
    f.spec.command.shell = true;
    f.spec.command.argv = {"set -- {prompt}; printf '%s\\n' \"argc=$#\"; printf 'arg=[%s]' \"$1\""};
    f.spec.command.workdir = f.dir;
    REQUIRE(f.Check().empty());
    CapturingProcessRunner runner;
    REQUIRE(f.Run(runner, SystemClock()).status == CaseStatus::kOk);
    REQUIRE(runner.seen.argv.size() == 3);
    CHECK(runner.seen.argv[0] == "/bin/sh");
    CHECK(runner.seen.argv[1] == "-c");
    // Reassemble the output: the prompt may itself contain a newline.
    std::string output;
    for (const auto& line : runner.lines) output += line + "\n";
    CHECK(output == "argc=1\narg=[" + prompt + "]\n");
  }
  CHECK_FALSE(std::filesystem::exists(f.dir + "/injected"));
  CHECK_FALSE(std::filesystem::exists(f.dir + "/pwned"));
  CHECK_FALSE(std::filesystem::exists(f.dir + "/pwned2"));
}

TEST_CASE("Command: Check names unknown placeholders with a suggestion") {
  Fixture f;
  f.spec.command.argv = {"train", "--steps", "{stpes}", "{zzz}"};
  f.spec.command.env = {{"OUT", "{outptu_dir}"}};
  f.spec.command.workdir = "{plandir}";
  CHECK(f.Check() ==
        std::vector<std::string>{
            "unknown placeholder '{stpes}' in command.argv[2] (did you mean '{steps}'?)",
            "unknown placeholder '{zzz}' in command.argv[3] (known: {case_id} {repeat} {model} "
            "{model_path} {dataset} {dataset_path} {output_dir} {steps} {epochs} {nodes} "
            "{topology} {network} {prompt} {max_new_tokens} {plan_dir} {plan} {stage} {run_id})",
            "unknown placeholder '{outptu_dir}' in command.env.OUT (did you mean '{output_dir}'?)",
            "unknown placeholder '{plandir}' in command.workdir (did you mean '{plan_dir}'?)",
        });
}

TEST_CASE("Command: Check rejects an empty argv or a split shell command or bad regexes") {
  Fixture f;
  CHECK(f.Check() == std::vector<std::string>{
                         "command.argv is empty: give the launch command, one element per argument "
                         "(command: {argv: [...]})"});
  f.spec.system = "command";  // the parser's default: the backend's name, which is not a system
  f.spec.command.argv = {"run"};
  CHECK(f.Check() == std::vector<std::string>{
                         "a command case must say which system its command runs (system: fsdp | share | <label>)"});
  f.spec.system = "fsdp";
  // A native case's ranks take `env:`; a command's environment is command.env.
  f.spec.env.vars = {{"NCCL_DEBUG", "INFO"}};
  CHECK(f.Check() == std::vector<std::string>{"a command case's environment is command.env; `env:` sets the ranks' "
                                              "environment of a native case"});
  f.spec.env = {};
  // The decode step is the native backends' own; a command decodes as it does.
  f.spec.workload = Workload::kInference;
  f.spec.inference.decode_step = DecodeStepChoice::kGraph;
  CHECK(f.Check() == std::vector<std::string>{"inference.decode_step: graph is a native backend's setting; a command "
                                              "case decodes as its command does (remove it, or say it in command.argv)"});
  f.spec.inference.decode_step = DecodeStepChoice::kHost;
  CHECK(f.Check().empty());
  f.spec.workload = Workload::kPretrain;

  f.spec.command.shell = true;
  f.spec.command.argv = {"torchrun", "train.py"};
  f.spec.command.metrics = {{"tps", "tokens/s: ([0-9.]+", "tokens/s"}, {"total", "total \\d+", "s"}};
  f.spec.command.step_regex = "step (?<step>\\d+)";
  std::vector<std::string> problems = f.Check();
  REQUIRE(problems.size() == 4);
  CHECK(problems[0] ==
        "command.shell is true, so command.argv must be one string for /bin/sh -c (it has 2 "
        "elements)");
  CHECK(problems[1].rfind("command.metrics[0] (tps): bad regex 'tokens/s: ([0-9.]+': ", 0) == 0);
  CHECK(problems[2] ==
        "command.metrics[1] (total): regex 'total \\d+' has no capture group; the first group ( ) "
        "is the value");
  CHECK(problems[3].rfind("command.step_regex: bad regex 'step (?<step>\\d+)': ", 0) == 0);
  CHECK(EndsWith(problems[3], " (groups are positional: 1 = step, 2 = loss)"));

  // A case that fails Check still ends as a stored failure if run.
  FakeProcessRunner runner;
  ScriptedClock clock({0});
  BackendOutcome outcome = f.Run(runner, clock);
  CHECK(outcome.status == CaseStatus::kFailed);
  CHECK(outcome.reason.rfind("command.shell is true", 0) == 0);
  CHECK(runner.calls == 0);
}

TEST_CASE("Command: metrics take the first group of the last numeric match") {
  Fixture f;
  f.spec.command.argv = {"/bin/sh", "-c",
                         "echo 'tokens/s: 10.5'; echo 'tokens/s: 12.25'; echo 'tokens/s: abc';"
                         "echo 'total 99 s'; exit 2"};
  f.spec.command.metrics = {{"tokens_per_second", "tokens/s: (\\S+)", "tokens/s"},
                            {"total_generation_seconds", "total (\\d+) s", "s"},
                            {"never_printed", "absent (\\d+)", "s"}};
  BackendOutcome outcome = f.Run();
  // A failed case keeps what it printed: the status says it failed.
  CHECK(outcome.status == CaseStatus::kFailed);
  REQUIRE(outcome.measurements.size() == 2);
  const Measurement& tps = outcome.measurements[0];
  CHECK(tps.name == "tokens_per_second");
  CHECK(tps.value == 12.25);
  CHECK(tps.unit == "tokens/s");
  CHECK(tps.how == Provenance::kMeasured);
  CHECK(tps.method == "parsed from output by regex");
  const Measurement& total = outcome.measurements[1];
  CHECK(total.name == "total_generation_seconds");
  CHECK(total.value == 99);
  CHECK(total.unit == "s");
}

TEST_CASE("Command: request_regex lines become the schedule's request samples") {
  Fixture f;
  f.spec.workload = Workload::kInference;
  f.spec.length.reset();
  f.spec.inference.max_new_tokens = {100, 110, 120};
  f.spec.command.argv = {"infer"};
  f.spec.command.request_regex = "request \\d+ tokens (\\S+) seconds (\\S+)";
  FakeProcessRunner runner;
  runner.lines = {"request 0 tokens 100 seconds 0.5", "noise", "request 1 tokens many seconds 1",
                  "request 1 tokens 110 seconds 0.75", "request 2 tokens 120 seconds 1.25",
                  "request 3 tokens 7 seconds 0.1"};
  runner.result.ending = ProcessResult::Ending::kExited;
  runner.result.exit_code = 0;
  ScriptedClock clock({100});
  BackendOutcome outcome = f.Run(runner, clock);
  CHECK(outcome.status == CaseStatus::kOk);
  REQUIRE(f.events.requests.size() == 4);
  CHECK(f.events.requests[0].index == 0);
  CHECK(f.events.requests[0].max_new_tokens == 100);
  CHECK(f.events.requests[0].generated_tokens == 100);
  CHECK(f.events.requests[0].seconds == 0.5);
  CHECK(f.events.requests[1].max_new_tokens == 110);  // the unparsable line is not a request
  CHECK(f.events.requests[1].seconds == 0.75);
  CHECK(f.events.requests[2].max_new_tokens == 120);
  CHECK(f.events.requests[3].max_new_tokens == 7);  // beyond the schedule: its own count
  CHECK(f.events.status_lines.front() == "request 1/3: 100 tokens in 0.5 s");
}

TEST_CASE("Command: request_regex needs two groups") {
  Fixture f;
  f.spec.command.argv = {"infer"};
  f.spec.command.request_regex = "tokens (\\d+)";
  auto problems = MakeCommandBackend()->Check(f.plan, f.spec);
  REQUIRE(problems.size() == 1);
  CHECK(problems[0] ==
        "command.request_regex: regex 'tokens (\\d+)' needs 2 capture groups: 1 = generated tokens, 2 = seconds");
}

TEST_CASE("Command: step_regex lines become step samples timed by the clock") {
  Fixture f;
  f.spec.command.argv = {"train"};
  f.spec.command.step_regex = "step (\\S+)(?: loss (\\S+))?";
  FakeProcessRunner runner;
  runner.lines = {"step 1 loss 3.5", "noise", "step 2 loss 3.25", "step x loss 1", "step 3",
                  "step 4 loss nan"};
  runner.result.ending = ProcessResult::Ending::kExited;
  runner.result.exit_code = 0;
  // Launch at 100; then one clock read per step line.
  ScriptedClock clock({100, 101.5, 104, 104.5, 110});
  BackendOutcome outcome = f.Run(runner, clock);
  CHECK(outcome.status == CaseStatus::kOk);
  CHECK(outcome.measurements.empty());
  REQUIRE(f.events.steps.size() == 4);
  CHECK(f.events.steps[0].step == 1);
  CHECK(f.events.steps[0].seconds == 1.5);
  CHECK(f.events.steps[0].loss == 3.5);
  CHECK(f.events.steps[1].step == 2);
  CHECK(f.events.steps[1].seconds == 2.5);
  CHECK(f.events.steps[1].loss == 3.25);
  CHECK(f.events.steps[2].step == 3);
  CHECK(f.events.steps[2].seconds == 0.5);
  CHECK_FALSE(f.events.steps[2].loss.has_value());
  CHECK(f.events.steps[3].step == 4);
  CHECK_FALSE(f.events.steps[3].loss.has_value());
  CHECK(f.events.status_lines == std::vector<std::string>{"step 1/1000 loss 3.5",
                                                          "step 2/1000 loss 3.25", "step 3/1000",
                                                          "step 4/1000"});
}

TEST_CASE("Command: Check knows the log formats, with a suggestion, and refuses one beside step_regex") {
  Fixture f;
  f.spec.command.argv = {"train"};
  f.spec.command.log_format = "megatron";
  CHECK(f.Check().empty());
  f.spec.command.log_format = "xtunr";
  CHECK(f.Check() == std::vector<std::string>{"command.log_format: unknown format 'xtunr' (did you mean 'xtuner'?)"});
  f.spec.command.log_format = "nemo";
  CHECK(f.Check() == std::vector<std::string>{
                         "command.log_format: unknown format 'nemo' (known: xtuner, internevo, deepspeed, megatron, "
                         "hf-trainer, vllm-serving, vllm-throughput, vllm-latency, lightllm, tgi)"});
  f.spec.command.log_format = "megatron";
  f.spec.command.metrics = {{"tokens", "tokens (\\d+)", ""}, {"final_loss", "loss (\\S+)", ""}};
  CHECK(f.Check() == std::vector<std::string>{
                         "command.metrics[1] (final_loss): the log format megatron stores a figure of that name; "
                         "give the metric a name of its own"});
  f.spec.command.metrics.clear();
  f.spec.command.step_regex = "step (\\d+)";
  CHECK(f.Check() == std::vector<std::string>{
                         "command.step_regex and command.log_format (megatron) both read the step lines: keep one "
                         "(an empty step_regex: \"\" removes an inherited one)"});
}

TEST_CASE("Command: a log format stores canonical figures and step samples; metrics regexes still work beside it") {
  Fixture f;
  f.spec.command.argv = {"train"};
  f.spec.command.log_format = "megatron";
  f.spec.command.metrics = {{"consumed_samples", "consumed samples:\\s*(\\d+)", "samples"}};
  f.spec.warmup_steps = 1;
  FakeProcessRunner runner;
  runner.lines = {
      " iteration        1/       3 | consumed samples:          128 | elapsed time per iteration (ms): 9000.5 | "
      "throughput per GPU (TFLOP/s/GPU): 140.1 | lm loss: 2.500000E+00 |",
      " iteration        2/       3 | consumed samples:          256 | elapsed time per iteration (ms): 5444.9 | "
      "throughput per GPU (TFLOP/s/GPU): 239.8 | lm loss: 2.100000E+00 |",
      " iteration        3/       3 | consumed samples:          384 | elapsed time per iteration (ms): 5400.1 | "
      "throughput per GPU (TFLOP/s/GPU): 241.0 | lm loss: 1.900000E+00 |"};
  runner.result = FakeProcessRunner::Exited(0);
  ScriptedClock clock({100});
  BackendOutcome outcome = f.Run(runner, clock);
  CHECK(outcome.status == CaseStatus::kOk);
  std::map<std::string, Measurement> by_name;
  for (const Measurement& m : outcome.measurements) by_name[m.name] = m;
  REQUIRE(by_name.count(metric::kTflops));
  CHECK(*by_name[metric::kTflops].value == doctest::Approx((239.8 + 241.0) / 2));
  CHECK(by_name[metric::kTflops].method ==
        "parsed from megatron output, median of 2 steps after warm-up (steps 2..3; spread 239.8..241)");
  CHECK(*by_name[metric::kStepSeconds].value == doctest::Approx((5.4449 + 5.4001) / 2));
  CHECK(by_name[metric::kStepSeconds].unit == "s");
  CHECK(*by_name[metric::kFinalLoss].value == doctest::Approx(1.9));
  CHECK(*by_name["consumed_samples"].value == 384);
  CHECK(by_name["consumed_samples"].method == "parsed from output by regex");
  REQUIRE(f.events.steps.size() == 3);
  CHECK(f.events.steps[0].seconds == doctest::Approx(9.0005));  // as printed, not the clock
  CHECK(f.events.steps[2].loss == doctest::Approx(1.9));
  CHECK(f.events.status_lines.back() == "step 3/1000 loss 1.9");
  CHECK((outcome.facts == std::vector<std::pair<std::string, std::string>>{
                              {"log_format", "megatron: 3 step lines (1 in warm-up)"}}));
}

TEST_CASE("Command: `cat` of a saved XTuner log stores its medians after warm-up") {
  Fixture f;
  f.spec.command.argv = {"cat", std::string(PROTOCOL_SOURCE_DIR) + "/data/logs/xtuner.log"};
  f.spec.command.log_format = "xtuner";
  f.spec.warmup_steps = 10;
  BackendOutcome outcome = f.Run();
  CHECK(outcome.status == CaseStatus::kOk);
  std::map<std::string, Measurement> by_name;
  for (const Measurement& m : outcome.measurements) by_name[m.name] = m;
  REQUIRE(by_name.count(metric::kTgs));
  CHECK(*by_name[metric::kTgs].value == doctest::Approx(2403.3));
  CHECK(by_name[metric::kTgs].unit == "tokens/s");
  CHECK(*by_name[metric::kTflops].value == doctest::Approx(151.35));
  CHECK(*by_name[metric::kStepSeconds].value == doctest::Approx(2.80195));
  CHECK(f.events.steps.size() == 5);
}

TEST_CASE("Command: a log's complete last line is read whole; one cut inside its last value is skipped") {
  // mmengine prints tokens_per_sec last: the last step's throughput ends the output.
  const std::string log =
      "11/26 09:01:08 - mmengine - INFO - Iter(train) [1/3]  time: 2.9000  tokens_per_sec: 2362.5\n"
      "11/26 09:01:11 - mmengine - INFO - Iter(train) [2/3]  time: 2.8000  tokens_per_sec: 2900.0\n"
      "11/26 09:01:14 - mmengine - INFO - Iter(train) [3/3]  time: 2.7000  tokens_per_sec: 3100.0\n";
  auto tgs = [](const BackendOutcome& outcome) -> const Measurement* {
    for (const Measurement& m : outcome.measurements)
      if (m.name == metric::kTgs) return &m;
    return nullptr;
  };
  {
    Fixture f;
    f.spec.command.argv = {"printf", "%s", log};  // as the program prints it, newline included
    f.spec.command.log_format = "xtuner";
    BackendOutcome outcome = f.Run();
    REQUIRE(tgs(outcome) != nullptr);
    CHECK(*tgs(outcome)->value == doctest::Approx(2900.0));  // the median of all three steps
    CHECK(tgs(outcome)->method == "parsed from xtuner output, median of 3 steps (steps 1..3; spread 2362.5..3100)");
    CHECK(f.events.steps.size() == 3);
  }
  {
    Fixture f;
    f.spec.command.argv = {"printf", "%s", log.substr(0, log.size() - 4)};  // stops inside "3100.0"
    f.spec.command.log_format = "xtuner";
    BackendOutcome outcome = f.Run();
    REQUIRE(tgs(outcome) != nullptr);
    CHECK(*tgs(outcome)->value == doctest::Approx((2362.5 + 2900.0) / 2));
    CHECK(tgs(outcome)->method ==
          "parsed from xtuner output, median of 2 steps (steps 1..2; spread 2362.5..2900); 1 value cut at the end of "
          "the output skipped");
  }
}
