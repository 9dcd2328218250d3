#ifndef PROTOCOL_RUNNER_PLAN_INHERITANCE_H_
#define PROTOCOL_RUNNER_PLAN_INHERITANCE_H_

// Inheritance of plan defaults → stage defaults → case: one YAML map on top
// of another.
#include "runner/plan/yaml_tree.h"

namespace protocol {

// `over` on top of `base` (both maps): the maps training, inference, command,
// env and reference merge key by key (at any depth); every other key
// replaces. Keys keep the position of their first appearance.
YamlNode MergeDefaults(const YamlNode& base, const YamlNode& over);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_PLAN_INHERITANCE_H_
