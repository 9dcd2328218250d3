#include "backends/native/launch/native_role.h"

namespace protocol {

template <>
const std::vector<VocabularyEntry<native::NativeRole>>& Vocabulary<native::NativeRole>() {
  static const std::vector<VocabularyEntry<native::NativeRole>> names = {{native::NativeRole::kFsdp, "fsdp"},
                                                                          {native::NativeRole::kShare, "share"}};
  return names;
}

}  // namespace protocol
