#ifndef PROTOCOL_REPORT_TABLES_WORK_SETTINGS_H_
#define PROTOCOL_REPORT_TABLES_WORK_SETTINGS_H_

// The work a case did, as the settings that decide it: a ratio between two
// cases is only fair when they did the same work (docs/report.md, "Ratios
// between the same work"). Read from the resolved plan a run stores.
//
//   every workload   model (preset, path), quantization (nf4, double_quant),
//                    device (the compute dtype follows it: bf16 on CUDA,
//                    float32 on CPU)
//   training         dataset, seq_len, batch_size (global sequences per step),
//                    with a 4-bit model the LoRA settings (lora_rank,
//                    lora_alpha, lora_freeze_a)
//   inference        prompt, request schedule (max_new_tokens per request),
//                    ignore_eos, decode_step (the tokens are the same, but
//                    a graph-replayed decode against one at the host's
//                    position measures the decode step, not the systems)
// Settings that are the system's own way of doing that work (ranks, sync_every,
// outer_lr, checkpoint_every, grad_accum, timeouts) are not compared.

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "runner/plan/plan.h"

namespace protocol {

// (setting, value as text), in the order above.
using WorkSettings = std::vector<std::pair<std::string, std::string>>;

WorkSettings CaseWorkSettings(const Plan& plan, const CaseSpec& spec);

// Case id → its work settings, for every case of a stored resolved plan; empty
// when the text is not a plan this build can read (an import's file, a plan of
// an older format): nothing is then known, and nothing refused.
std::map<std::string, WorkSettings> PlanWorkSettings(const std::string& plan_text);

// "seq_len: 128 vs 256", one per setting that differs (a setting one side
// lacks counts as "(none)"); empty when the work is the same.
std::vector<std::string> WorkDifferences(const WorkSettings& a, const WorkSettings& b);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_TABLES_WORK_SETTINGS_H_
