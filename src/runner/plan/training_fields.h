#ifndef PROTOCOL_RUNNER_PLAN_TRAINING_FIELDS_H_
#define PROTOCOL_RUNNER_PLAN_TRAINING_FIELDS_H_

// The `training:` settings, one row each: the key, the TrainingSettings member
// it sets, its default, its bounds and its meaning. Everything that lists the
// settings iterates these rows, in this order: the parser (reading and
// checking), the resolved text (plan_emit), the worker's case file
// (worker_case), the round-trip tests and the table in docs/plan-format.md
// (tests/runner/plan/training_fields_test.cc compares it with the rows).
//
// Adding a setting, e.g. `threads`, an integer >= 1 with default 1:
//   1. plan.h, TrainingSettings: `int64_t threads;` (no initializer: the
//      constructor gives every member its row's default);
//   2. training_fields.cc, at the end of the rows:
//      Row("threads", &S::threads, 1, "CPU threads per process", AtLeast(1)),
//   3. docs/plan-format.md, "Training settings": the same row (the test says
//      what it must read);
//   then use `spec.training.threads` (or `wc.training.threads` in a rank).
// Parsing, bounds, the resolved text, the case file and the round-trip tests
// follow from the row. The resolved text of every plan gains the key, so its
// sha256 changes: `--resume` of a run made before refuses, as for any change
// of the resolved text (docs/plan-format.md, "The resolved plan").

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "runner/plan/plan.h"

namespace protocol {

// A pointer to one member of TrainingSettings, of one of the types a setting
// may have (integer, int, number, boolean, or a closed vocabulary).
using TrainingMember =
    std::variant<int64_t TrainingSettings::*, int TrainingSettings::*, double TrainingSettings::*,
                 bool TrainingSettings::*, DeviceChoice TrainingSettings::*, Sharding TrainingSettings::*,
                 ReduceDtype TrainingSettings::*, OuterState TrainingSettings::*>;
// A setting's value, of its member's type.
using TrainingValue = std::variant<int64_t, int, double, bool, DeviceChoice, Sharding, ReduceDtype, OuterState>;

// True for the members that are a closed vocabulary (plan.h's Vocabulary<E>):
// they are read, written and carried as their names.
template <typename T>
inline constexpr bool kIsVocabularySetting =
    std::is_same_v<T, DeviceChoice> || std::is_same_v<T, Sharding> || std::is_same_v<T, ReduceDtype> ||
    std::is_same_v<T, OuterState>;

// Accepted values of an integer or a number: [min, max], or (min, max] when
// open_min. max infinite: no upper bound (integers: their type's largest).
struct TrainingBounds {
  double min = -std::numeric_limits<double>::infinity();
  double max = std::numeric_limits<double>::infinity();
  bool open_min = false;
  // Integers: the word `auto` is accepted too, held as kSettingAuto (below
  // any bound) and written back as `auto`.
  bool or_auto = false;
};
inline constexpr int64_t kSettingAuto = -1;
static_assert(kCheckpointAuto == kSettingAuto);

struct TrainingField {
  const char* name;              // the key under `training:`, e.g. "batch_size"
  TrainingMember member;         // what it sets
  TrainingValue default_value;   // of the member's type
  const char* meaning;           // one line, as docs/plan-format.md's table says it
  TrainingBounds bounds;         // integers and numbers
};

// Every setting, in the order the resolved text writes them.
const std::vector<TrainingField>& TrainingFields();

// The names of TrainingFields(), in order (the keys `training:` accepts).
std::vector<std::string> TrainingFieldNames();

// Calls f(value) with a reference to field's member of `settings`, typed
// (int64_t&, int&, double&, bool&, or a vocabulary enum's reference).
template <typename Settings, typename F>
decltype(auto) VisitField(const TrainingField& field, Settings& settings, F&& f) {
  return std::visit([&](auto member) -> decltype(auto) { return f(settings.*member); }, field.member);
}

// Bounds for the rows: AtLeast(1) is ">= 1", AtLeast(0, 0.999) ">= 0 and
// <= 0.999", Above(0) "> 0", Above(0, 10) "> 0 and <= 10".
TrainingBounds AtLeast(double min, double max = std::numeric_limits<double>::infinity());
// The same bounds, and the word `auto` (an integer row).
TrainingBounds OrAuto(TrainingBounds bounds);
// True when field's value in `settings` is `auto`.
bool IsAutoSetting(const TrainingField& field, const TrainingSettings& settings);
TrainingBounds Above(double min, double max = std::numeric_limits<double>::infinity());

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_TRAINING_FIELDS_H_
