#include "runner/plan/inheritance.h"

#include <algorithm>
#include <set>
#include <string>

namespace protocol {
namespace {

using Kind = YamlNode::Kind;

// Maps merged key by key through inheritance (at any depth).
const std::set<std::string> kMergedMaps = {"training", "inference", "command", "env",
                                           "reference", "quality_target"};

}  // namespace

YamlNode MergeDefaults(const YamlNode& base, const YamlNode& over) {
  YamlNode out = base;
  for (const auto& [key, value] : over.entries) {
    auto it = std::find_if(out.entries.begin(), out.entries.end(),
                           [&](const auto& e) { return e.first.scalar == key.scalar; });
    if (it == out.entries.end()) {
      out.entries.emplace_back(key, value);
    } else if (kMergedMaps.count(key.scalar) && it->second.kind == Kind::kMap &&
               value.kind == Kind::kMap) {
      it->second = MergeDefaults(it->second, value);
    } else {
      it->first = key;
      it->second = value;
    }
  }
  return out;
}

}  // namespace protocol
