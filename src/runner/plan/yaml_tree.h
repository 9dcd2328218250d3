#ifndef PROTOCOL_RUNNER_PLAN_YAML_TREE_H_
#define PROTOCOL_RUNNER_PLAN_YAML_TREE_H_

// YAML as a plain tree with source locations: the one place that includes
// yaml-cpp is yaml_tree.cc. Parsers of plans and import files walk this tree
// and report FILE:LINE:COL for every value and key.

#include <string>
#include <utility>
#include <vector>

#include "runner/base/status.h"
#include "runner/plan/diagnostic.h"

namespace protocol {

struct YamlNode {
  enum class Kind { kNull, kScalar, kSequence, kMap };
  Kind kind = Kind::kNull;
  std::string scalar;     // kScalar: the text as written (unquoted)
  bool quoted = false;    // kScalar: written with quotes ('x' or "x")
  int line = 0;           // 1-based
  int column = 0;         // 1-based
  std::vector<YamlNode> items;                          // kSequence
  std::vector<std::pair<YamlNode, YamlNode>> entries;   // kMap, in file order; keys are scalars

  // Map lookup by key text; nullptr when absent or not a map.
  const YamlNode* Find(const std::string& key) const;
  YamlNode* Find(const std::string& key);
  // "null" | "scalar" | "sequence" | "map", for messages ("expected a map, got a sequence").
  const char* KindName() const;
};

// Parses YAML text. On failure returns a Diagnostic located in `file`:
// syntax errors with yaml-cpp's line/column, duplicate map keys, an empty
// document ("file is empty"), binary content ("file is not text (binary data
// at byte N)", N the 0-based offset of the first NUL or invalid UTF-8 byte),
// more than one document. Anchors, aliases (so merge keys) and non-scalar map
// keys are rejected. A null value written as "key:" is located at its key.
// Never throws.
struct YamlParse {
  bool ok = false;
  YamlNode root;
  Diagnostic error;  // when !ok
};
YamlParse ParseYaml(const std::string& text, const std::string& file);

// Reads and parses a file; a missing or unreadable file is a Diagnostic too.
// `text_out` (optional) receives the file's text.
YamlParse ParseYamlFile(const std::string& path, std::string* text_out = nullptr);

// Canonical block-style YAML for a tree (used for the resolved plan text that is
// hashed and stored). Scalars are quoted when needed to round-trip.
std::string EmitYaml(const YamlNode& node);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_YAML_TREE_H_
