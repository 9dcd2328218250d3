#ifndef PROTOCOL_BACKENDS_NATIVE_MODEL_DECODE_BUCKET_CAPACITY_H_
#define PROTOCOL_BACKENDS_NATIVE_MODEL_DECODE_BUCKET_CAPACITY_H_

// The capacity of the decode bucket (generate.h DecodeBuckets) a generation
// of `total` positions (prompt + new tokens) decodes into: `total` rounded up
// to a multiple of kDecodeBucketPositions, at most the model's context
// `max_seq_len`, and never less than `total`. No libtorch here: the memory
// estimate (validate) counts the buckets a schedule keeps by it.

#include <algorithm>
#include <cstdint>

namespace protocol {
namespace native {

inline constexpr int64_t kDecodeBucketPositions = 256;

inline int64_t DecodeBucketCapacity(int64_t total, int64_t max_seq_len) {
  const int64_t rounded = (total + kDecodeBucketPositions - 1) / kDecodeBucketPositions * kDecodeBucketPositions;
  return std::max(total, std::min(rounded, max_seq_len));
}

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_MODEL_DECODE_BUCKET_CAPACITY_H_
