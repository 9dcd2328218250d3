#ifndef PROTOCOL_RUNNER_PLAN_PLAN_READER_H_
#define PROTOCOL_RUNNER_PLAN_PLAN_READER_H_

// Typed, located reading of YamlNode values, shared by the plan parser and the
// import-file parser. Each reader either returns the value or appends one
// Diagnostic to the error list and returns nullopt, so a parser can read every
// field, collect every problem, and stop only at the end.
//
// Messages (the field name is the YAML key):
//   expected an integer for 'steps', got 'ten'
//   expected a map for 'training', got a sequence
//   'steps' is out of range: 99999999999999999999 (at most 9223372036854775807)
//   unknown key 'stpes' (did you mean 'steps'?)
//   unknown workload 'pretrian' (did you mean 'pretrain'?)

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "runner/plan/diagnostic.h"
#include "runner/plan/yaml_tree.h"

namespace protocol {

class NodeReader {
 public:
  // Diagnostics are appended to *errors (not owned; must outlive the reader).
  NodeReader(std::string file, std::vector<Diagnostic>* errors);

  // Nodes whose line is negative were not read from the file but from an
  // out-of-file source (a `--set` override): line -1 is labels[0], etc. Their
  // diagnostics are located at the label, e.g. "--set stages[0].timeout=5".
  void SetOutOfFileLabels(std::vector<std::string> labels) { labels_ = std::move(labels); }

  SourceLocation Where(const YamlNode& node) const;
  void Error(const YamlNode& at, std::string message, std::string hint = "");
  const std::string& file() const { return file_; }
  std::vector<Diagnostic>& errors() { return *errors_; }

  // "'ten'", "a map", "a sequence", "nothing": how a value is named in messages.
  static std::string Describe(const YamlNode& node);

  // Type checks: true when `node` has the kind, else one error
  // "expected a map for '<name>', got ...".
  bool ExpectMap(const YamlNode& node, const std::string& name);
  bool ExpectSequence(const YamlNode& node, const std::string& name);

  // Reports every key of `map` not in `valid` ("unknown key 'x'"), with a
  // did-you-mean hint, or the list of valid keys when none is close.
  // REQUIRES: map.kind == kMap.
  void CheckKeys(const YamlNode& map, const std::vector<std::string>& valid);

  // A scalar, as written. Numbers and booleans are accepted as text.
  std::optional<std::string> String(const YamlNode& node, const std::string& name);
  // A decimal integer fitting int64 ("+5", "-3", "1000"; not "1e3", not "1.0").
  std::optional<int64_t> Integer(const YamlNode& node, const std::string& name);
  // An integer in [min, max]; below min: "'repeats' must be >= 1, got 0".
  std::optional<int64_t> IntegerIn(const YamlNode& node, const std::string& name, int64_t min,
                                   int64_t max);
  // A finite decimal number ("3.0e-4", "93", "-1.5").
  std::optional<double> Number(const YamlNode& node, const std::string& name);
  // true | false (also True/TRUE/False/FALSE).
  std::optional<bool> Bool(const YamlNode& node, const std::string& name);
  // Seconds >= 0: a number, or a duration text of <number><h|m|s> parts,
  // largest unit first: "90s", "15m", "6h", "1h30m", "1.5h".
  std::optional<double> Duration(const YamlNode& node, const std::string& name);
  // One of `choices`: "unknown <what> 'x'" with did-you-mean over choices.
  std::optional<std::string> OneOf(const YamlNode& node, const std::string& name,
                                   const std::string& what, const std::vector<std::string>& choices);
  // One of the names of enum E (Vocabulary<E>, plan.h), read as OneOf reads.
  template <typename E>
  std::optional<E> OneOf(const YamlNode& node, const std::string& name, const std::string& what) {
    std::optional<std::string> text = OneOf(node, name, what, NamesOf<E>());
    return text ? ParseName<E>(*text) : std::nullopt;
  }

 private:
  std::string file_;
  std::vector<Diagnostic>* errors_;
  std::vector<std::string> labels_;
};

// How a length's problems are told (plans and import files word them each
// their own way): both steps and epochs given, a training workload without
// either, an inference workload with one.
struct LengthWording {
  std::string both;       // "case 'a' gives both steps and epochs (give one)"
  std::string missing;    // "case 'a' needs steps or epochs (pretrain)"
  std::string inference;  // "an inference case has no steps or epochs (...)"
};

// The length of a case or an imported result: `steps` or `epochs` of `map`,
// integers >= 1; exactly one for a training workload, none for inference
// (workload unknown: only the integers are checked). Problems are reported to
// `r` — a missing length at `at` — and clear *ok. Returns the length read, if any.
std::optional<Length> ReadLength(NodeReader& r, const YamlNode& map, const YamlNode& at,
                                 std::optional<Workload> workload, const LengthWording& wording, bool* ok);

// Sorts diagnostics into file order (out-of-file ones, line 0, first) and drops
// exact duplicates (an error in an inherited default is found once per case).
void SortAndDedupe(std::vector<Diagnostic>& diagnostics);

// Parses a duration text ("6h", "1h30m", "90s", "15m", "2.5") into seconds.
std::optional<double> ParseDurationText(const std::string& text);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_PLAN_READER_H_
