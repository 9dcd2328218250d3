#include "runner/plan/overrides.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <vector>

#include "runner/base/text.h"
#include "runner/plan/plan_reader.h"

namespace protocol {
namespace {

using Kind = YamlNode::Kind;

void Relocate(YamlNode& node, int line) {
  node.line = line;
  node.column = 0;
  for (auto& item : node.items) Relocate(item, line);
  for (auto& [k, v] : node.entries) {
    Relocate(k, line);
    Relocate(v, line);
  }
}

std::string Singular(const std::string& key) {
  if (key == "stages") return "stage";
  if (key == "cases") return "case";
  if (key == "nodes") return "node";
  if (key == "metrics") return "metric";
  return "item";
}

struct PathStep {
  std::string key;
  std::vector<std::string> selectors;  // [..] contents
};

bool ParsePath(const std::string& path, std::vector<PathStep>* steps) {
  size_t i = 0;
  while (true) {
    PathStep step;
    while (i < path.size() && path[i] != '.' && path[i] != '[') step.key += path[i++];
    if (step.key.empty()) return false;
    while (i < path.size() && path[i] == '[') {
      size_t close = path.find(']', i);
      if (close == std::string::npos || close == i + 1) return false;
      step.selectors.push_back(path.substr(i + 1, close - i - 1));
      i = close + 1;
    }
    steps->push_back(step);
    if (i == path.size()) return true;
    if (path[i] != '.') return false;
    ++i;
  }
}

}  // namespace

std::string ApplyOverride(YamlNode& root, const std::string& text, int line) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) return "expected PATH=VALUE (e.g. defaults.timeout=1h)";
  std::string path = Trim(text.substr(0, eq));
  std::vector<PathStep> steps;
  if (!ParsePath(path, &steps)) return fmt::format("bad path '{}'", path);

  YamlParse value = ParseYaml(text.substr(eq + 1), "--set");
  YamlNode value_node;  // kNull for an empty value
  if (!value.ok && value.error.message != "file is empty") return value.error.message;
  if (value.ok) value_node = std::move(value.root);
  Relocate(value_node, line);

  YamlNode* node = &root;
  std::string where;  // the path walked so far, for messages
  for (const PathStep& step : steps) {
    // Every step looks a key up, so a missing (or empty) node on the way is
    // created as a map: `defaults.training.batch_size` creates `training`.
    if (node->kind == Kind::kNull) node->kind = Kind::kMap;
    if (node->kind != Kind::kMap)
      return fmt::format("'{}' is {}, not a map", where, NodeReader::Describe(*node));
    where += (where.empty() ? "" : ".") + step.key;
    YamlNode* child = node->Find(step.key);
    if (!child) {
      if (!step.selectors.empty())
        return fmt::format("the plan has no '{}', so [{}] selects nothing", where, step.selectors.front());
      YamlNode key;
      key.kind = Kind::kScalar;
      key.scalar = step.key;
      key.line = line;
      YamlNode empty;
      empty.line = line;
      node->entries.emplace_back(std::move(key), std::move(empty));
      child = &node->entries.back().second;
    }
    node = child;
    for (const auto& sel : step.selectors) {
      if (node->kind != Kind::kSequence)
        return fmt::format("'{}' is {}, not a list", where, NodeReader::Describe(*node));
      bool index = std::all_of(sel.begin(), sel.end(), [](char c) { return c >= '0' && c <= '9'; });
      YamlNode* found = nullptr;
      if (index) {
        size_t n = sel.size() > 9 ? SIZE_MAX : std::stoul(sel);
        if (n >= node->items.size())
          return fmt::format("index {} is out of range ('{}' has {} items)", sel, where, node->items.size());
        found = &node->items[n];
      } else {
        for (auto& item : node->items) {
          const YamlNode* name = item.Find("name");
          const YamlNode* id = item.Find("id");
          if ((name && name->scalar == sel) || (id && id->scalar == sel)) {
            found = &item;
            break;
          }
        }
        if (!found) return fmt::format("no {} named '{}'", Singular(step.key), sel);
      }
      where += "[" + sel + "]";
      node = found;
    }
  }
  *node = std::move(value_node);
  return "";
}

}  // namespace protocol
