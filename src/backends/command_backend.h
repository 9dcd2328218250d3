#ifndef PROTOCOL_BACKENDS_COMMAND_BACKEND_H_
#define PROTOCOL_BACKENDS_COMMAND_BACKEND_H_

// The `command` backend: runs a lab's own launch command verbatim (argv, no
// shell unless the case says shell: true), timed, its output logged and parsed
// for metrics (CommandSpec::metrics) and per-step samples (step_regex), or
// read by a named log format (CommandSpec::log_format, log_format.h).
//
// Placeholders in argv, env values and workdir, each substituted inside one
// argv element (never split, never re-parsed by a shell; with shell: true the
// values are single-quoted): {case_id} {repeat} {model} {model_path}
// {dataset} {dataset_path} {output_dir} {steps} {epochs} {nodes} {topology}
// {network} {prompt} {max_new_tokens} (comma-separated) {plan_dir}.

#include <memory>

#include "runner/exec/backend.h"

namespace protocol {

std::unique_ptr<Backend> MakeCommandBackend();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_COMMAND_BACKEND_H_
