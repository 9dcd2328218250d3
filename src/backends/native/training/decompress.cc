#include "backends/native/training/decompress.h"

#include <snappy.h>
#include <zlib.h>
#include <zstd.h>

#include "runner/base/text.h"

namespace protocol {
namespace native {

const char* CodecName(Codec codec) {
  switch (codec) {
    case Codec::kUncompressed: return "UNCOMPRESSED";
    case Codec::kSnappy: return "SNAPPY";
    case Codec::kGzip: return "GZIP";
    case Codec::kZstd: return "ZSTD";
  }
  return "?";
}

namespace {

Status SizeMismatch(Codec codec, size_t got, size_t expected) {
  return Status::Corruption(
      fmt::format("{} data decompressed to {} bytes, the page header says {}", CodecName(codec), got, expected));
}

Status Gunzip(std::string_view in, size_t expected_size, std::string* out) {
  z_stream z{};
  // 15 + 32: a zlib or gzip header, detected.
  if (inflateInit2(&z, 15 + 32) != Z_OK) return Status::Internal("zlib: inflateInit2 failed");
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out->data());
  z.avail_out = static_cast<uInt>(out->size());
  int rc = Z_OK;
  // Concatenated gzip members (allowed by RFC 1952) restart the stream.
  while (true) {
    rc = inflate(&z, Z_FINISH);
    if (rc == Z_STREAM_END && z.avail_in > 0 && z.avail_out > 0) {
      if (inflateReset(&z) != Z_OK) break;
      continue;
    }
    break;
  }
  const size_t written = out->size() - z.avail_out;
  const bool left_over = z.avail_in > 0;
  inflateEnd(&z);
  if (rc != Z_STREAM_END)
    return Status::Corruption(fmt::format("GZIP data is corrupt or larger than the page header's {} bytes ({})",
                                               expected_size, z.msg ? z.msg : "inflate " + std::to_string(rc)));
  if (written != expected_size || left_over) return SizeMismatch(Codec::kGzip, written, expected_size);
  return Status::Ok();
}

}  // namespace

Status Decompress(Codec codec, std::string_view in, size_t expected_size, std::string* out) {
  switch (codec) {
    case Codec::kUncompressed:
      if (in.size() != expected_size) return SizeMismatch(codec, in.size(), expected_size);
      out->assign(in.data(), in.size());
      return Status::Ok();
    case Codec::kSnappy: {
      size_t length = 0;
      if (!snappy::GetUncompressedLength(in.data(), in.size(), &length))
        return Status::Corruption("SNAPPY data is corrupt (no length header)");
      if (length != expected_size) return SizeMismatch(codec, length, expected_size);
      out->resize(expected_size);
      if (!snappy::RawUncompress(in.data(), in.size(), out->data()))
        return Status::Corruption("SNAPPY data is corrupt");
      return Status::Ok();
    }
    case Codec::kGzip:
      out->resize(expected_size);
      return Gunzip(in, expected_size, out);
    case Codec::kZstd: {
      out->resize(expected_size);
      const size_t n = ZSTD_decompress(out->data(), out->size(), in.data(), in.size());
      if (ZSTD_isError(n)) return Status::Corruption(fmt::format("ZSTD data is corrupt ({})", ZSTD_getErrorName(n)));
      if (n != expected_size) return SizeMismatch(codec, n, expected_size);
      return Status::Ok();
    }
  }
  return Status::InvalidArgument("unknown codec");
}

}  // namespace native
}  // namespace protocol
