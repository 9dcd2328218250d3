#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_THRIFT_COMPACT_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_THRIFT_COMPACT_H_

// A decoder of Apache Thrift's compact protocol, the encoding of parquet's
// FileMetaData and page headers (thrift/doc/specs/thrift-compact-protocol.md).
// It reads what its caller asks for and skips the rest, so fields a newer
// writer adds are passed over. Input is untrusted: every read is bounds
// checked, nesting is limited to kMaxDepth, and the first error sticks (later
// reads return zeros) so the caller checks ok() once per structure.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace protocol {
namespace native {

class CompactReader {
 public:
  // Compact-protocol type ids (a field header's low nibble).
  enum Type : uint8_t {
    kStop = 0, kTrue = 1, kFalse = 2, kByte = 3, kI16 = 4, kI32 = 5, kI64 = 6,
    kDouble = 7, kBinary = 8, kList = 9, kSet = 10, kMap = 11, kStruct = 12,
  };
  static constexpr int kMaxDepth = 32;

  CompactReader(const uint8_t* data, size_t size) : p_(data), begin_(data), end_(data + size) {}

  // Structs: BeginStruct, then NextField until it returns false (STOP or an
  // error), reading or Skip()ping each field, then EndStruct.
  void BeginStruct();
  void EndStruct();
  bool NextField(int16_t* id, uint8_t* type);

  // Values of a field (or list element) of type `type`. ReadInt takes any
  // integer type; a mismatched type is an error.
  int64_t ReadInt(uint8_t type);
  bool ReadBool(uint8_t type);  // a struct field's bool is in its type; a list element's is a byte
  std::string_view ReadBinary(uint8_t type);
  // A list or set header: its element type and size. Loops over the elements
  // must also stop when !ok(): the size is untrusted.
  uint32_t ReadListHeader(uint8_t type, uint8_t* element_type);
  void Skip(uint8_t type);

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  size_t position() const { return static_cast<size_t>(p_ - begin_); }
  void Fail(const std::string& why);

 private:
  uint64_t ReadVarint();
  uint8_t ReadByte();
  void SkipBytes(uint64_t n);

  const uint8_t* p_;
  const uint8_t* begin_;
  const uint8_t* end_;
  int16_t last_field_id_ = 0;
  int16_t saved_ids_[kMaxDepth] = {};
  int depth_ = 0;
  std::string error_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_THRIFT_COMPACT_H_
