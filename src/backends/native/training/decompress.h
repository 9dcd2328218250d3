#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_DECOMPRESS_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_DECOMPRESS_H_

// The block codecs of parquet pages: the one place that includes snappy,
// zstd and zlib (Debian's libsnappy-dev, libzstd-dev, zlib1g-dev).

#include <cstddef>
#include <string>
#include <string_view>

#include "runner/base/status.h"

namespace protocol {
namespace native {

enum class Codec { kUncompressed, kSnappy, kGzip, kZstd };

const char* CodecName(Codec codec);

// Decompresses `in` into `*out`, which ends with exactly `expected_size`
// bytes (its earlier capacity is reused). kCorruption when the input is
// corrupt, or decompresses to another size: the caller names the file and page.
// GZIP accepts a gzip or zlib stream (parquet writers emit gzip; RFC 1952).
Status Decompress(Codec codec, std::string_view in, size_t expected_size, std::string* out);

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_DECOMPRESS_H_
