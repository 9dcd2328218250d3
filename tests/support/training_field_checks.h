#ifndef PROTOCOL_TESTS_TRAINING_FIELD_CHECKS_H_
#define PROTOCOL_TESTS_TRAINING_FIELD_CHECKS_H_

// Round trips of the training settings, row by row (training_fields.h): a
// field added to the table is changed, written, read back and compared by
// every test that uses these, without touching the tests.

#include <fmt/format.h>

#include <string>
#include <type_traits>
#include <vector>

#include "runner/base/text.h"
#include "runner/plan/training_fields.h"

namespace protocol::testing {

// A value of the field other than the one `t` has, within the field's bounds
// when `t` holds the default: +1, +0.25, the other boolean, the next name of a vocabulary.
inline void ChangeField(const TrainingField& field, TrainingSettings* t) {
  VisitField(field, *t, [](auto& value) {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) value = !value;
    else if constexpr (kIsVocabularySetting<T>) {  // the next name of its vocabulary
      const auto& names = Vocabulary<T>();
      for (size_t i = 0; i < names.size(); ++i)
        if (names[i].value == value) {
          value = names[(i + 1) % names.size()].value;
          break;
        }
    }
    else if constexpr (std::is_same_v<T, double>) value += 0.25;
    else value += 1;
  });
}

// Every field changed (ChangeField).
inline TrainingSettings ChangedSettings() {
  TrainingSettings t;
  for (const TrainingField& field : TrainingFields()) ChangeField(field, &t);
  return t;
}

// The field's value as a plan writes it: "8", "0.0003", "true", "cpu".
inline std::string FieldText(const TrainingField& field, const TrainingSettings& t) {
  if (IsAutoSetting(field, t)) return "auto";
  return VisitField(field, t, [](const auto& value) -> std::string {
    using T = std::decay_t<decltype(value)>;
    if constexpr (std::is_same_v<T, bool>) return value ? "true" : "false";
    else if constexpr (kIsVocabularySetting<T>) return NameOf(value);
    else return fmt::format("{}", value);
  });
}

// "seq_len (129 vs 128)" for every field where a and b differ, in row order.
inline std::vector<std::string> DifferentFields(const TrainingSettings& a, const TrainingSettings& b) {
  std::vector<std::string> out;
  for (const TrainingField& field : TrainingFields()) {
    const bool same = std::visit([&](auto member) { return a.*member == b.*member; }, field.member);
    if (!same) out.push_back(fmt::format("{} ({} vs {})", field.name, FieldText(field, a), FieldText(field, b)));
  }
  return out;
}

// `{batch_size: 9, seq_len: 129, ...}`: every field of t, as a YAML flow map.
inline std::string TrainingYaml(const TrainingSettings& t) {
  std::vector<std::string> parts;
  for (const TrainingField& field : TrainingFields())
    parts.push_back(fmt::format("{}: {}", field.name, FieldText(field, t)));
  return "{" + Join(parts, ", ") + "}";
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_TRAINING_FIELD_CHECKS_H_
