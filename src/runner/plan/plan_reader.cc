#include "runner/plan/plan_reader.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <tuple>

#include "runner/base/text.h"

namespace protocol {

NodeReader::NodeReader(std::string file, std::vector<Diagnostic>* errors)
    : file_(std::move(file)), errors_(errors) {}

SourceLocation NodeReader::Where(const YamlNode& node) const {
  if (node.line < 0) {
    size_t index = static_cast<size_t>(-node.line - 1);
    return {index < labels_.size() ? labels_[index] : std::string("--set"), 0, 0};
  }
  return {file_, node.line, node.column};
}

void NodeReader::Error(const YamlNode& at, std::string message, std::string hint) {
  errors_->push_back(Diagnostic{Where(at), std::move(message), std::move(hint)});
}

std::string NodeReader::Describe(const YamlNode& node) {
  switch (node.kind) {
    case YamlNode::Kind::kNull: return "nothing";
    case YamlNode::Kind::kScalar: return "'" + node.scalar + "'";
    case YamlNode::Kind::kSequence: return "a sequence";
    case YamlNode::Kind::kMap: return "a map";
  }
  return "?";
}

bool NodeReader::ExpectMap(const YamlNode& node, const std::string& name) {
  if (node.kind == YamlNode::Kind::kMap) return true;
  Error(node, fmt::format("expected a map for '{}', got {}", name, Describe(node)));
  return false;
}

bool NodeReader::ExpectSequence(const YamlNode& node, const std::string& name) {
  if (node.kind == YamlNode::Kind::kSequence) return true;
  Error(node, fmt::format("expected a list for '{}', got {}", name, Describe(node)));
  return false;
}

void NodeReader::CheckKeys(const YamlNode& map, const std::vector<std::string>& valid) {
  for (const auto& [key, value] : map.entries) {
    if (std::find(valid.begin(), valid.end(), key.scalar) != valid.end()) continue;
    std::string close = DidYouMean(key.scalar, valid);
    std::string hint = close.empty() ? "valid keys: " + Join(valid, ", ")
                                     : fmt::format("did you mean '{}'?", close);
    Error(key, fmt::format("unknown key '{}'", key.scalar), hint);
  }
}

std::optional<std::string> NodeReader::String(const YamlNode& node, const std::string& name) {
  if (node.kind == YamlNode::Kind::kScalar) return node.scalar;
  Error(node, fmt::format("expected a string for '{}', got {}", name, Describe(node)));
  return std::nullopt;
}

std::optional<int64_t> NodeReader::Integer(const YamlNode& node, const std::string& name) {
  auto bad = [&]() -> std::optional<int64_t> {
    Error(node, fmt::format("expected an integer for '{}', got {}", name, Describe(node)));
    return std::nullopt;
  };
  if (node.kind != YamlNode::Kind::kScalar) return bad();
  const std::string& s = node.scalar;
  size_t i = (!s.empty() && (s[0] == '+' || s[0] == '-')) ? 1 : 0;
  if (i == s.size()) return bad();
  for (size_t k = i; k < s.size(); ++k)
    if (s[k] < '0' || s[k] > '9') return bad();
  errno = 0;
  char* end = nullptr;
  long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno == ERANGE) {
    Error(node, fmt::format("'{}' is out of range: {} (at most {})", name, s,
                            s[0] == '-' ? std::numeric_limits<int64_t>::min()
                                        : std::numeric_limits<int64_t>::max()));
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

std::optional<int64_t> NodeReader::IntegerIn(const YamlNode& node, const std::string& name,
                                             int64_t min, int64_t max) {
  auto v = Integer(node, name);
  if (!v) return std::nullopt;
  if (*v < min) {
    if (min == 1) Error(node, fmt::format("'{}' must be > 0, got {}", name, *v));
    else Error(node, fmt::format("'{}' must be >= {}, got {}", name, min, *v));
    return std::nullopt;
  }
  if (*v > max) {
    Error(node, fmt::format("'{}' is out of range: {} (at most {})", name, *v, max));
    return std::nullopt;
  }
  return v;
}

namespace {

// Strict decimal number: [+-]digits[.digits][e[+-]digits], or .digits.
bool ParseNumberText(const std::string& s, double* out) {
  if (s.empty()) return false;
  size_t i = 0;
  if (s[i] == '+' || s[i] == '-') ++i;
  size_t digits = 0;
  while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  if (i < s.size() && s[i] == '.') {
    ++i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
  }
  if (digits == 0) return false;
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '+' || s[i] == '-')) ++i;
    size_t exp_digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++exp_digits;
    if (exp_digits == 0) return false;
  }
  if (i != s.size()) return false;
  double v = std::strtod(s.c_str(), nullptr);
  if (!std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

std::optional<double> NodeReader::Number(const YamlNode& node, const std::string& name) {
  double v = 0;
  if (node.kind == YamlNode::Kind::kScalar && ParseNumberText(node.scalar, &v)) return v;
  Error(node, fmt::format("expected a number for '{}', got {}", name, Describe(node)));
  return std::nullopt;
}

std::optional<bool> NodeReader::Bool(const YamlNode& node, const std::string& name) {
  if (node.kind == YamlNode::Kind::kScalar) {
    const std::string& s = node.scalar;
    if (s == "true" || s == "True" || s == "TRUE") return true;
    if (s == "false" || s == "False" || s == "FALSE") return false;
  }
  Error(node, fmt::format("expected true or false for '{}', got {}", name, Describe(node)));
  return std::nullopt;
}

std::optional<double> ParseDurationText(const std::string& text) {
  double plain = 0;
  if (ParseNumberText(text, &plain)) return plain;
  // <number><unit> parts, units strictly decreasing: h, m, s.
  static const std::string kUnits = "hms";
  static const double kSeconds[] = {3600, 60, 1};
  size_t i = 0;
  int last_unit = -1;
  double total = 0;
  if (text.empty()) return std::nullopt;
  while (i < text.size()) {
    size_t start = i;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.')) ++i;
    if (i == start || i == text.size()) return std::nullopt;
    double value = 0;
    if (!ParseNumberText(text.substr(start, i - start), &value)) return std::nullopt;
    size_t unit = kUnits.find(text[i]);
    if (unit == std::string::npos || static_cast<int>(unit) <= last_unit) return std::nullopt;
    last_unit = static_cast<int>(unit);
    total += value * kSeconds[unit];
    ++i;
  }
  return total;
}

std::optional<double> NodeReader::Duration(const YamlNode& node, const std::string& name) {
  std::optional<double> v;
  if (node.kind == YamlNode::Kind::kScalar) v = ParseDurationText(node.scalar);
  if (!v) {
    Error(node, fmt::format("expected a duration for '{}' (seconds, or like 90s, 15m, 6h, 1h30m), got {}",
                            name, Describe(node)));
    return std::nullopt;
  }
  if (*v < 0) {
    Error(node, fmt::format("'{}' must be >= 0, got {}", name, node.scalar));
    return std::nullopt;
  }
  return v;
}

std::optional<std::string> NodeReader::OneOf(const YamlNode& node, const std::string& name,
                                             const std::string& what,
                                             const std::vector<std::string>& choices) {
  auto s = String(node, name);
  if (!s) return std::nullopt;
  if (std::find(choices.begin(), choices.end(), *s) != choices.end()) return s;
  std::string close = DidYouMean(*s, choices);
  Error(node, fmt::format("unknown {} '{}'", what, *s),
        close.empty() ? "expected one of: " + Join(choices, ", ") : fmt::format("did you mean '{}'?", close));
  return std::nullopt;
}

std::optional<Length> ReadLength(NodeReader& r, const YamlNode& map, const YamlNode& at,
                                 std::optional<Workload> workload, const LengthWording& wording, bool* ok) {
  const YamlNode* steps = map.Find("steps");
  const YamlNode* epochs = map.Find("epochs");
  std::optional<int64_t> steps_v, epochs_v;
  if (steps && !(steps_v = r.IntegerIn(*steps, "steps", 1, INT64_MAX))) *ok = false;
  if (epochs && !(epochs_v = r.IntegerIn(*epochs, "epochs", 1, INT64_MAX))) *ok = false;
  if (!workload) return std::nullopt;
  if (*workload == Workload::kInference) {
    for (const YamlNode* n : {steps, epochs}) {
      if (!n) continue;
      r.Error(*n, wording.inference);
      *ok = false;
    }
    return std::nullopt;
  }
  if (steps && epochs) {
    r.Error(*epochs, wording.both);
    *ok = false;
  } else if (!steps && !epochs) {
    r.Error(at, wording.missing);
    *ok = false;
  } else if (steps_v) {
    return Length{Length::Unit::kSteps, *steps_v};
  } else if (epochs_v) {
    return Length{Length::Unit::kEpochs, *epochs_v};
  }
  return std::nullopt;
}

void SortAndDedupe(std::vector<Diagnostic>& diagnostics) {
  std::vector<Diagnostic> out;
  for (auto& d : diagnostics) {
    bool seen = false;
    for (const auto& o : out)
      if (o.where.file == d.where.file && o.where.line == d.where.line &&
          o.where.column == d.where.column && o.message == d.message && o.hint == d.hint) {
        seen = true;
        break;
      }
    if (!seen) out.push_back(std::move(d));
  }
  std::stable_sort(out.begin(), out.end(), [](const Diagnostic& a, const Diagnostic& b) {
    return std::tie(a.where.line, a.where.column) < std::tie(b.where.line, b.where.column);
  });
  diagnostics = std::move(out);
}

}  // namespace protocol
