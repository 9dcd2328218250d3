#ifndef PROTOCOL_BACKENDS_NATIVE_PENDING_H_
#define PROTOCOL_BACKENDS_NATIVE_PENDING_H_

// Stand-ins for the native libtorch backends until they are built (issues 3
// and 4). They never pretend to train: every case fails with a clear reason.

#include <memory>

#include "backends/backend.h"

namespace protocol {

std::unique_ptr<Backend> MakePendingShareBackend();

}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_PENDING_H_
