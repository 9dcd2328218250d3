#ifndef PROTOCOL_REPORT_TABLES_SENTENCES_H_
#define PROTOCOL_REPORT_TABLES_SENTENCES_H_

// The conclusions of a report (docs/report.md, "Sentences"): one sentence per
// ratio with a value, with its interval, provenance notes and the runs of its
// sides, or why a ratio was refused; and the parts the verdict (verdict.h)
// shares with them. Internal to src/report.

#include <string>
#include <utility>
#include <vector>

#include "report/report_data.h"

namespace protocol {

// "share is 3.21× faster than fsdp on 1 node (321 %) for pretrain 1000 steps."
// With an interval: "share is 1.04× (95 % interval 0.97–1.12) faster than …",
// the interval in the direction of the factor (inverted for "slower").
// `context` goes in parentheses after `what`; `clause` (", but its held-out
// loss …") follows it. `inputs` name the two sides (baseline first).
// REQUIRES: ratio_cell.value.
std::string Sentence(const std::string& subject, const std::string& object, const ReportCell& ratio_cell,
                     const std::string& what, const std::string& context,
                     const std::vector<std::pair<std::string, const ReportCell*>>& inputs,
                     const std::string& clause = "");

// A ratio refused because its sides ran on different machines (or did different work):
// "No ratio of share to fsdp on 1 node for pretrain 1000 steps: run 3 and run
// 5 ran on different machines (cpu_cores: 8 vs 16)."
std::string RefusedSentence(const std::string& subject, const std::string& object, const std::string& what,
                            const ReportCell& ratio_cell);

// What a ratio's sentence ends with, in order, each a clause: the inputs not
// measured end to end ("fsdp figure extrapolated, share figure imported"),
// "sides from different runs (fsdp run 1, share run 2)", the interval note.
std::vector<std::string> RatioNotes(const ReportCell& ratio_cell,
                                    const std::vector<std::pair<std::string, const ReportCell*>>& inputs);

// "share is 3.00× faster than fsdp", "share is 1.25× slower than fsdp" (the
// inverse), "share is as fast as fsdp" (1.00 at 2 decimals).
std::string SpeedClaim(const std::string& subject, const std::string& object, double ratio);

// Why a ratio was refused: its `refused` text without "no ratio: ".
std::string RefusalReason(const ReportCell& ratio_cell);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_SENTENCES_H_
