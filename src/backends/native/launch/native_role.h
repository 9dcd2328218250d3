#ifndef PROTOCOL_BACKENDS_NATIVE_LAUNCH_NATIVE_ROLE_H_
#define PROTOCOL_BACKENDS_NATIVE_LAUNCH_NATIVE_ROLE_H_

// Which native backend a case runs on: the fsdp baseline or the share
// protocol. Named as the backends are registered ("fsdp", "share"); the case
// file (worker_case.h) carries it to every rank.

#include <vector>

#include "runner/plan/plan.h"

namespace protocol {
namespace native {

enum class NativeRole { kFsdp, kShare };

}  // namespace native

template <>
const std::vector<VocabularyEntry<native::NativeRole>>& Vocabulary<native::NativeRole>();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_LAUNCH_NATIVE_ROLE_H_
