#ifndef PROTOCOL_RUNNER_BASE_SHA256_H_
#define PROTOCOL_RUNNER_BASE_SHA256_H_

// SHA-256 (FIPS 180-4), our own implementation: the resolved plan's hash is
// stored with every run (RunRecord::plan_sha256) and compared on --resume.

#include <cstdint>
#include <string>
#include <string_view>

#include "runner/base/status.h"

namespace protocol {

// Incremental hasher: Update() any number of times, then HexDigest() once.
class Sha256 {
 public:
  Sha256();
  void Update(const void* data, size_t size);
  void Update(std::string_view data) { Update(data.data(), data.size()); }
  // 64 lowercase hex characters. REQUIRES: called once; Update() not called after.
  std::string HexDigest();

 private:
  void Block(const uint8_t* p);  // compresses one 64-byte block into state_
  uint32_t state_[8];
  uint8_t buffer_[64];
  size_t buffered_ = 0;
  uint64_t total_bytes_ = 0;
};

// 64 lowercase hex characters of SHA-256(data).
std::string Sha256Hex(std::string_view data);

// SHA-256 of a file's bytes. kNotFound when it does not exist, kIoError when it
// cannot be read (both name the path).
Result<std::string> Sha256File(const std::string& path);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_SHA256_H_
