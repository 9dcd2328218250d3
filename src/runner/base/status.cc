#include "runner/base/status.h"

namespace protocol {

std::string Status::ToString() const {
  const char* prefix = "";
  switch (code_) {
    case Code::kOk: return "ok";
    case Code::kInvalidArgument: prefix = "invalid argument: "; break;
    case Code::kNotFound: prefix = "not found: "; break;
    case Code::kIoError: prefix = "I/O error: "; break;
    case Code::kCorruption: prefix = "corruption: "; break;
    case Code::kInternal: prefix = "internal error: "; break;
  }
  return prefix + message_;
}

}  // namespace protocol
