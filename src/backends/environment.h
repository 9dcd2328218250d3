#ifndef PROTOCOL_BACKENDS_ENVIRONMENT_H_
#define PROTOCOL_BACKENDS_ENVIRONMENT_H_

// The run context: facts about this machine and its software, stored with
// every run so a result says where it was obtained. Missing facts are left
// out, never guessed.

#include <string>
#include <utility>
#include <vector>

namespace protocol {

struct EnvironmentKey {
  const char* key;
  const char* source;  // where the value comes from
};
// Every key CollectEnvironment may store, in the order it stores them.
const std::vector<EnvironmentKey>& EnvironmentKeys();

// The facts of this machine, (key, value) with keys of EnvironmentKeys().
std::vector<std::pair<std::string, std::string>> CollectEnvironment();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_ENVIRONMENT_H_
