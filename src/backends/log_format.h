#ifndef PROTOCOL_BACKENDS_LOG_FORMAT_H_
#define PROTOCOL_BACKENDS_LOG_FORMAT_H_

// Named readers of the output of the systems labs run (a command case's
// `log_format`): XTuner, InternEvo, DeepSpeed, Megatron-LM, the Hugging Face
// Trainer, vLLM's three benchmarks, LightLLM and TGI. Each format is one entry
// of one table (log_format.cc): the lines it reads, which field of a line is
// which canonical figure (records.h, namespace metric) and its unit
// conversion. One engine walks the table; no code path knows a system.
// docs/backends.md ("Log formats") shows each format's lines and figures.
//
// Input is the command's output, line by line. A line may still hold several
// redraws of a progress bar (separated by '\r'), ANSI colour codes and a
// rank's prefix ("[rank0]: "); the reader copes with all three.
//
// What is stored:
//   step lines   each is a StepSample (its step number as printed, or 1, 2, 3 ...
//                for a format that prints none; its seconds as printed, or else the
//                time since the previous step line). A per-step figure is the
//                median over the lines whose step number is above warmup_steps,
//                with its spread in the method; the loss is the last one logged,
//                the peak memory the largest.
//   one-off      a figure printed once (a runtime, a benchmark's result): the
//                value printed last, in the canonical unit (ms → s, GiB → bytes).
// A figure that never appeared is absent, never zero. A value that is not a
// finite number is skipped and counted in the method of its figure and in
// Summary(). The last line of the output may have been cut (a killed
// process): a value that runs to its very end is not read, and counted.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runner/store/records.h"

namespace protocol {

// A finite number filling all of `text` (blanks around it allowed); nullopt
// otherwise ("12abc", "nan", "inf" and "" are not figures).
std::optional<double> ParseFiniteNumber(std::string_view text);
// A base-10 integer filling all of `text` (blanks around it allowed).
std::optional<int64_t> ParseWholeNumber(std::string_view text);

// Every format's name, in table order ("xtuner", "internevo", ...).
std::vector<std::string> LogFormatNames();
bool IsLogFormat(const std::string& name);
// The canonical figures `format` may store, in the order Figures() stores
// them; empty for a name that is not a format.
std::vector<std::string> LogFormatFigures(const std::string& format);

class LogFormatReader {
 public:
  // REQUIRES: IsLogFormat(format). Steps numbered warmup_steps or less are
  // warm-up: stored as step samples, left out of the medians.
  LogFormatReader(const std::string& format, int warmup_steps);
  ~LogFormatReader();

  // One line of output, arrived at `now_seconds` (any clock, used only for the
  // seconds of step lines that print none). Returns the step samples that
  // became final: a line is read once the next one arrives, so that only the
  // very last line can be taken as cut (Finish says whether it was).
  std::vector<StepSample> Feed(std::string_view line, double now_seconds);
  // The output ended: reads the last line. Returns its step samples, if any.
  // `ended_mid_line`: the output stopped inside that line (no line end after
  // it: process.h ProcessResult::ended_mid_line); then a value at its very
  // end may be cut and is skipped, and counted as cut. A last line that ended
  // is read like any other.
  std::vector<StepSample> Finish(bool ended_mid_line);

  // The canonical figures, in the order of the figure table; provenance
  // measured, method "parsed from <format> output, ...". REQUIRES: Finish().
  std::vector<Measurement> Figures() const;
  // One line for the case's facts: the format, the step lines read (and how
  // many were warm-up), values skipped as malformed or cut.
  // E.g. "xtuner: 50 step lines (10 in warm-up); 1 malformed value skipped".
  std::string Summary() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_LOG_FORMAT_H_
