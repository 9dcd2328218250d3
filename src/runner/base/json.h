#ifndef PROTOCOL_RUNNER_BASE_JSON_H_
#define PROTOCOL_RUNNER_BASE_JSON_H_

// JSON: the one place that includes nlohmann/json. ordered_json keeps keys in
// insertion order so emitted files are stable (golden tests, --verify).

#include <nlohmann/json.hpp>

namespace protocol {
using Json = nlohmann::ordered_json;

// `rows` as a JSON array: to_json(row) for each row, in order.
template <typename Rows, typename ToJson>
Json ArrayOf(const Rows& rows, ToJson to_json) {
  Json out = Json::array();
  for (const auto& row : rows) out.push_back(to_json(row));
  return out;
}
}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_JSON_H_
