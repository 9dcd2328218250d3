#ifndef PROTOCOL_RUNNER_BASE_JSON_H_
#define PROTOCOL_RUNNER_BASE_JSON_H_

// JSON: the one place that includes nlohmann/json. ordered_json keeps keys in
// insertion order so emitted files are stable (golden tests, --verify).

#include <nlohmann/json.hpp>

namespace protocol {
using Json = nlohmann::ordered_json;
}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_JSON_H_
