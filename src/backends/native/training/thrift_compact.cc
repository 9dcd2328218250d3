#include "backends/native/training/thrift_compact.h"

#include "runner/base/text.h"

namespace protocol {
namespace native {
namespace {

bool IsInteger(uint8_t type) {
  return type == CompactReader::kByte || type == CompactReader::kI16 || type == CompactReader::kI32 ||
         type == CompactReader::kI64;
}

int64_t ZigZag(uint64_t n) { return static_cast<int64_t>(n >> 1) ^ -static_cast<int64_t>(n & 1); }

}  // namespace

void CompactReader::Fail(const std::string& why) {
  if (error_.empty()) error_ = fmt::format("{} (at byte {})", why, position());
  p_ = end_;
}

uint8_t CompactReader::ReadByte() {
  if (p_ >= end_) {
    Fail("truncated");
    return 0;
  }
  return *p_++;
}

uint64_t CompactReader::ReadVarint() {
  uint64_t value = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    const uint8_t b = ReadByte();
    if (!ok()) return 0;
    value |= static_cast<uint64_t>(b & 0x7f) << shift;
    if (!(b & 0x80)) return value;
  }
  Fail("varint longer than 10 bytes");
  return 0;
}

void CompactReader::SkipBytes(uint64_t n) {
  if (n > static_cast<uint64_t>(end_ - p_)) {
    Fail("truncated");
    return;
  }
  p_ += n;
}

void CompactReader::BeginStruct() {
  if (depth_ >= kMaxDepth) {
    Fail("structures nested too deep");
    return;
  }
  saved_ids_[depth_++] = last_field_id_;
  last_field_id_ = 0;
}

void CompactReader::EndStruct() {
  if (depth_ > 0) last_field_id_ = saved_ids_[--depth_];
}

bool CompactReader::NextField(int16_t* id, uint8_t* type) {
  if (!ok()) return false;
  const uint8_t header = ReadByte();
  if (!ok() || header == kStop) return false;
  *type = header & 0x0f;
  const uint8_t delta = header >> 4;
  if (delta != 0) {
    *id = static_cast<int16_t>(last_field_id_ + delta);
  } else {
    *id = static_cast<int16_t>(ZigZag(ReadVarint()));
  }
  last_field_id_ = *id;
  if (*type > kStruct) {
    Fail(fmt::format("unknown field type {}", *type));
    return false;
  }
  return ok();
}

int64_t CompactReader::ReadInt(uint8_t type) {
  if (!IsInteger(type)) {
    Fail(fmt::format("expected an integer, found type {}", type));
    return 0;
  }
  if (type == kByte) return static_cast<int8_t>(ReadByte());
  return ZigZag(ReadVarint());
}

bool CompactReader::ReadBool(uint8_t type) {
  if (type == kTrue) return true;
  if (type == kFalse) return false;
  Fail(fmt::format("expected a bool, found type {}", type));
  return false;
}

std::string_view CompactReader::ReadBinary(uint8_t type) {
  if (type != kBinary) {
    Fail(fmt::format("expected binary, found type {}", type));
    return {};
  }
  const uint64_t n = ReadVarint();
  const uint8_t* start = p_;
  SkipBytes(n);
  if (!ok()) return {};
  return std::string_view(reinterpret_cast<const char*>(start), static_cast<size_t>(n));
}

uint32_t CompactReader::ReadListHeader(uint8_t type, uint8_t* element_type) {
  if (type != kList && type != kSet) {
    Fail(fmt::format("expected a list, found type {}", type));
    return 0;
  }
  const uint8_t header = ReadByte();
  *element_type = header & 0x0f;
  uint64_t size = header >> 4;
  if (size == 15) size = ReadVarint();
  if (size > 0x7fffffff) Fail("list size out of range");
  return ok() ? static_cast<uint32_t>(size) : 0;
}

void CompactReader::Skip(uint8_t type) {
  if (!ok()) return;
  switch (type) {
    case kTrue:
    case kFalse:
      return;  // a struct field's bool is in its header
    case kByte:
      ReadByte();
      return;
    case kI16:
    case kI32:
    case kI64:
      ReadVarint();
      return;
    case kDouble:
      SkipBytes(8);
      return;
    case kBinary:
      SkipBytes(ReadVarint());
      return;
    case kList:
    case kSet: {
      uint8_t element = 0;
      const uint32_t n = ReadListHeader(type, &element);
      if (depth_ >= kMaxDepth) return Fail("structures nested too deep");
      ++depth_;
      for (uint32_t i = 0; i < n && ok(); ++i) {
        if (element == kTrue || element == kFalse) ReadByte();  // a list's bools are bytes
        else Skip(element);
      }
      --depth_;
      return;
    }
    case kMap: {
      const uint64_t n = ReadVarint();
      if (n == 0) return;
      const uint8_t types = ReadByte();
      if (depth_ >= kMaxDepth) return Fail("structures nested too deep");
      ++depth_;
      for (uint64_t i = 0; i < n && ok(); ++i) {
        for (uint8_t t : {static_cast<uint8_t>(types >> 4), static_cast<uint8_t>(types & 0x0f)}) {
          if (t == kTrue || t == kFalse) ReadByte();
          else Skip(t);
        }
      }
      --depth_;
      return;
    }
    case kStruct: {
      BeginStruct();
      int16_t id = 0;
      uint8_t t = 0;
      while (NextField(&id, &t)) Skip(t);
      EndStruct();
      return;
    }
    default:
      Fail(fmt::format("cannot skip type {}", type));
  }
}

}  // namespace native
}  // namespace protocol
