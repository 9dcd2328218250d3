#include "backends/native/training/parquet.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "runner/base/text.h"

#include "backends/native/training/thrift_compact.h"

namespace protocol {
namespace native {
namespace fs = std::filesystem;
namespace {

using T = CompactReader;

// parquet.thrift's enums, the values this reader meets.
enum PhysicalType { kByteArray = 6 };
const char* const kPhysicalTypeNames[] = {"BOOLEAN", "INT32", "INT64", "INT96", "FLOAT", "DOUBLE", "BYTE_ARRAY",
                                          "FIXED_LEN_BYTE_ARRAY"};
enum Repetition { kRequired = 0, kOptional = 1, kRepeated = 2 };
enum PageType { kDataPage = 0, kIndexPage = 1, kDictionaryPage = 2, kDataPageV2 = 3 };
enum Encoding {
  kPlain = 0, kPlainDictionary = 2, kRle = 3, kBitPacked = 4, kDeltaLengthByteArray = 6, kDeltaByteArray = 7,
  kRleDictionary = 8,
};
const char* const kEncodingNames[] = {"PLAIN", "GROUP_VAR_INT", "PLAIN_DICTIONARY", "RLE", "BIT_PACKED",
                                      "DELTA_BINARY_PACKED", "DELTA_LENGTH_BYTE_ARRAY", "DELTA_BYTE_ARRAY",
                                      "RLE_DICTIONARY", "BYTE_STREAM_SPLIT"};
const char* const kCodecNames[] = {"UNCOMPRESSED", "SNAPPY", "GZIP", "LZO", "BROTLI", "LZ4", "ZSTD", "LZ4_RAW"};

const char* const kReadsEncodings =
    "the reader reads PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY values";

std::string EncodingName(int64_t e) {
  return e >= 0 && e < 10 ? kEncodingNames[e] : fmt::format("encoding {}", e);
}

// ---- footer ------------------------------------------------------------------

struct SchemaNode {
  std::string name;
  int64_t type = -1, repetition = kRequired, num_children = 0;
};

struct ColumnMeta {
  int64_t type = -1, codec = 0, num_values = 0, total_compressed_size = 0;
  int64_t data_page_offset = -1, dictionary_page_offset = -1;
  std::vector<std::string> path;
  std::vector<int64_t> encodings;  // every encoding of the chunk: values and levels
};

struct ColumnChunkMeta {
  bool has_meta = false, encrypted = false, external = false;
  ColumnMeta meta;
};

struct RowGroupMeta {
  int64_t num_rows = 0;
  std::vector<ColumnChunkMeta> columns;
};

struct FileMeta {
  std::vector<SchemaNode> schema;
  std::vector<RowGroupMeta> row_groups;
  int64_t num_rows = 0;
  bool encrypted = false;
};

// Reads a struct: on_field(id, type) returns whether it consumed the field.
template <typename F>
void ReadStruct(T& r, F on_field) {
  r.BeginStruct();
  int16_t id = 0;
  uint8_t type = 0;
  while (r.NextField(&id, &type))
    if (!on_field(id, type)) r.Skip(type);
  r.EndStruct();
}

template <typename F>
void ReadList(T& r, uint8_t type, F on_element) {
  uint8_t element = 0;
  const uint32_t n = r.ReadListHeader(type, &element);
  for (uint32_t i = 0; i < n && r.ok(); ++i) on_element(element);
}

ColumnMeta ReadColumnMeta(T& r) {
  ColumnMeta m;
  ReadStruct(r, [&](int16_t id, uint8_t t) {
    switch (id) {
      case 1: m.type = r.ReadInt(t); return true;
      case 2: ReadList(r, t, [&](uint8_t e) { m.encodings.push_back(r.ReadInt(e)); }); return true;
      case 3: ReadList(r, t, [&](uint8_t e) { m.path.emplace_back(r.ReadBinary(e)); }); return true;
      case 4: m.codec = r.ReadInt(t); return true;
      case 5: m.num_values = r.ReadInt(t); return true;
      case 7: m.total_compressed_size = r.ReadInt(t); return true;
      case 9: m.data_page_offset = r.ReadInt(t); return true;
      case 11: m.dictionary_page_offset = r.ReadInt(t); return true;
      default: return false;
    }
  });
  return m;
}

FileMeta ReadFileMeta(T& r) {
  FileMeta f;
  ReadStruct(r, [&](int16_t id, uint8_t t) {
    switch (id) {
      case 2:
        ReadList(r, t, [&](uint8_t e) {
          if (e != T::kStruct) return r.Fail("schema element is not a struct");
          SchemaNode n;
          ReadStruct(r, [&](int16_t sid, uint8_t st) {
            switch (sid) {
              case 1: n.type = r.ReadInt(st); return true;
              case 3: n.repetition = r.ReadInt(st); return true;
              case 4: n.name = std::string(r.ReadBinary(st)); return true;
              case 5: n.num_children = r.ReadInt(st); return true;
              default: return false;
            }
          });
          f.schema.push_back(std::move(n));
        });
        return true;
      case 3: f.num_rows = r.ReadInt(t); return true;
      case 4:
        ReadList(r, t, [&](uint8_t e) {
          if (e != T::kStruct) return r.Fail("row group is not a struct");
          RowGroupMeta g;
          ReadStruct(r, [&](int16_t gid, uint8_t gt) {
            if (gid == 3) {
              g.num_rows = r.ReadInt(gt);
              return true;
            }
            if (gid != 1) return false;
            ReadList(r, gt, [&](uint8_t ce) {
              if (ce != T::kStruct) return r.Fail("column chunk is not a struct");
              ColumnChunkMeta c;
              ReadStruct(r, [&](int16_t cid, uint8_t ct) {
                switch (cid) {
                  case 1: c.external = !r.ReadBinary(ct).empty(); return true;
                  case 3: c.has_meta = true; c.meta = ReadColumnMeta(r); return true;
                  case 8: case 9: c.encrypted = true; return false;  // crypto_metadata, encrypted_column_metadata
                  default: return false;
                }
              });
              g.columns.push_back(std::move(c));
            });
            return true;
          });
          f.row_groups.push_back(std::move(g));
        });
        return true;
      case 8: f.encrypted = true; return false;  // encryption_algorithm: a plaintext footer of an encrypted file
      default: return false;
    }
  });
  return f;
}

Result<std::string> ReadRange(std::ifstream& in, int64_t offset, int64_t size) {
  std::string bytes(static_cast<size_t>(size), '\0');
  in.clear();
  in.seekg(offset);
  in.read(bytes.data(), size);
  if (in.gcount() != size) return Status::IoError("cannot read the file");
  return bytes;
}

// The leaf (column chunk index) of the top-level field `column`, or an error.
Result<int> FindColumn(const std::vector<SchemaNode>& schema, const std::string& column, bool* optional) {
  if (schema.empty()) return Status::Corruption("the footer has no schema");
  std::vector<std::string> names;
  int leaf = 0;
  size_t i = 1;
  for (int64_t child = 0; child < schema[0].num_children && i < schema.size(); ++child) {
    const SchemaNode& node = schema[i];
    // The subtree of this top-level field: its elements and leaves.
    size_t end = i + 1;
    int leaves = node.num_children > 0 ? 0 : 1;
    for (int64_t pending = node.num_children; pending > 0 && end < schema.size(); --pending, ++end) {
      pending += schema[end].num_children;
      if (schema[end].num_children == 0) ++leaves;
    }
    if (node.name == column) {
      if (node.num_children > 0 || node.repetition == kRepeated)
        return Status::InvalidArgument(fmt::format(
            "column '{}' is nested ({}); the reader reads a top-level string column", column,
            node.num_children > 0 ? "a group" : "repeated"));
      if (node.type != kByteArray)
        return Status::InvalidArgument(fmt::format(
            "column '{}' is {}, not a string (BYTE_ARRAY)", column,
            node.type >= 0 && node.type < 8 ? kPhysicalTypeNames[node.type] : "of no physical type"));
      *optional = node.repetition == kOptional;
      return leaf;
    }
    names.push_back(node.name);
    leaf += leaves;
    i = end;
  }
  return Status::InvalidArgument(
      fmt::format("no column '{}' (the file has: {}); set the dataset's `column:`", column, fmt::join(names, ", ")));
}

Result<ParquetTextReader::File> ReadFooter(const std::string& path, const std::string& column, ParquetTextStats* stats) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open the file");
  in.seekg(0, std::ios::end);
  const int64_t size = static_cast<int64_t>(in.tellg());
  if (size < 12) return Status::Corruption(fmt::format("not a parquet file ({} bytes; truncated?)", size));
  auto head = ReadRange(in, 0, 4);
  auto tail = ReadRange(in, size - 8, 8);
  if (!head.ok() || !tail.ok()) return Status::IoError("cannot read the file");
  if (tail->compare(4, 4, "PARE") == 0)
    return Status::InvalidArgument("the file is encrypted (PARE footer); encrypted parquet is not supported");
  if (*head != "PAR1" || tail->compare(4, 4, "PAR1") != 0)
    return Status::Corruption("not a parquet file (no PAR1 magic at both ends; truncated?)");
  uint32_t footer_size = 0;
  std::memcpy(&footer_size, tail->data(), 4);  // little-endian, as x86 and ARM hosts are
  if (footer_size > static_cast<uint64_t>(size - 12))
    return Status::Corruption(fmt::format("footer length {} exceeds the file's {} bytes", footer_size, size));
  const int64_t footer_start = size - 8 - footer_size;
  auto footer = ReadRange(in, footer_start, footer_size);
  if (!footer.ok()) return footer.status();
  T r(reinterpret_cast<const uint8_t*>(footer->data()), footer->size());
  FileMeta meta = ReadFileMeta(r);
  if (!r.ok()) return Status::Corruption("corrupt footer: " + r.error());
  if (meta.encrypted) return Status::InvalidArgument("the file's columns are encrypted; encrypted parquet is not supported");
  ParquetTextReader::File file;
  file.path = path;
  auto leaf = FindColumn(meta.schema, column, &file.optional);
  if (!leaf.ok()) return leaf.status();
  for (size_t g = 0; g < meta.row_groups.size(); ++g) {
    const RowGroupMeta& rg = meta.row_groups[g];
    const std::string where = fmt::format("row group {} of {}: ", g, meta.row_groups.size());
    if (static_cast<size_t>(*leaf) >= rg.columns.size())
      return Status::Corruption(where + fmt::format("has {} column chunks, column '{}' is number {}", rg.columns.size(),
                                                    column, *leaf + 1));
    const ColumnChunkMeta& c = rg.columns[static_cast<size_t>(*leaf)];
    if (c.encrypted) return Status::InvalidArgument(where + "the column is encrypted; encrypted parquet is not supported");
    if (c.external) return Status::InvalidArgument(where + "the column chunk is in another file (file_path), which the reader does not follow");
    if (!c.has_meta) return Status::Corruption(where + "the column chunk has no metadata");
    const ColumnMeta& m = c.meta;
    if (!m.path.empty() && (m.path.size() != 1 || m.path[0] != column))
      return Status::Corruption(where + fmt::format("chunk {} is '{}', not '{}'", *leaf, fmt::join(m.path, "."), column));
    ParquetTextReader::Chunk chunk;
    switch (m.codec) {
      case 0: chunk.codec = Codec::kUncompressed; break;
      case 1: chunk.codec = Codec::kSnappy; break;
      case 2: chunk.codec = Codec::kGzip; break;
      case 6: chunk.codec = Codec::kZstd; break;
      default:
        return Status::InvalidArgument(where + fmt::format(
            "column '{}' is compressed with {}; the reader supports UNCOMPRESSED, SNAPPY, GZIP and ZSTD",
            column, m.codec >= 0 && m.codec < 8 ? kCodecNames[m.codec] : fmt::format("codec {}", m.codec)));
    }
    for (int64_t e : m.encodings)
      if (e != kPlain && e != kPlainDictionary && e != kRle && e != kBitPacked && e != kRleDictionary &&
          e != kDeltaLengthByteArray && e != kDeltaByteArray)
        return Status::InvalidArgument(where + fmt::format("column '{}' is encoded {}; {}", column, EncodingName(e),
                                                           kReadsEncodings));
    chunk.offset = m.data_page_offset;
    if (m.dictionary_page_offset > 0 && m.dictionary_page_offset < chunk.offset) chunk.offset = m.dictionary_page_offset;
    chunk.size = m.total_compressed_size;
    chunk.num_values = m.num_values;
    if (chunk.offset < 4 || chunk.size <= 0 || chunk.num_values < 0 || chunk.offset > footer_start ||
        chunk.size > footer_start - chunk.offset)
      return Status::Corruption(where + fmt::format("column chunk bytes [{}, +{}) lie outside the file's data (4 to {})",
                                                    chunk.offset, chunk.size, footer_start));
    file.chunks.push_back(chunk);
  }
  stats->files += 1;
  stats->row_groups += static_cast<int64_t>(meta.row_groups.size());
  stats->rows += meta.num_rows;
  return file;
}

// ---- pages ---------------------------------------------------------------------

struct PageHeader {
  int64_t type = -1, uncompressed_size = -1, compressed_size = -1;
  int64_t num_values = 0, encoding = -1, def_encoding = kRle;
  int64_t v2_def_bytes = 0, v2_rep_bytes = 0;
  bool v2_compressed = true;
};

PageHeader ReadPageHeader(T& r) {
  PageHeader h;
  ReadStruct(r, [&](int16_t id, uint8_t t) {
    switch (id) {
      case 1: h.type = r.ReadInt(t); return true;
      case 2: h.uncompressed_size = r.ReadInt(t); return true;
      case 3: h.compressed_size = r.ReadInt(t); return true;
      case 5:  // DataPageHeader
        ReadStruct(r, [&](int16_t d, uint8_t dt) {
          switch (d) {
            case 1: h.num_values = r.ReadInt(dt); return true;
            case 2: h.encoding = r.ReadInt(dt); return true;
            case 3: h.def_encoding = r.ReadInt(dt); return true;
            default: return false;
          }
        });
        return true;
      case 7:  // DictionaryPageHeader
        ReadStruct(r, [&](int16_t d, uint8_t dt) {
          switch (d) {
            case 1: h.num_values = r.ReadInt(dt); return true;
            case 2: h.encoding = r.ReadInt(dt); return true;
            default: return false;
          }
        });
        return true;
      case 8:  // DataPageHeaderV2
        ReadStruct(r, [&](int16_t d, uint8_t dt) {
          switch (d) {
            case 1: h.num_values = r.ReadInt(dt); return true;
            case 4: h.encoding = r.ReadInt(dt); return true;
            case 5: h.v2_def_bytes = r.ReadInt(dt); return true;
            case 6: h.v2_rep_bytes = r.ReadInt(dt); return true;
            case 7: h.v2_compressed = r.ReadBool(dt); return true;
            default: return false;
          }
        });
        return true;
      default: return false;
    }
  });
  return h;
}

// The RLE / bit-packed hybrid encoding (parquet-format Encodings.md), read
// one value at a time so that no buffer is sized by an untrusted count.
class HybridDecoder {
 public:
  HybridDecoder(std::string_view data, int bit_width) : p_(data.data()), end_(data.data() + data.size()), width_(bit_width) {}

  bool Next(uint32_t* value) {
    if (width_ == 0) {  // every value is 0; runs carry no bytes worth reading
      *value = 0;
      return true;
    }
    while (left_ == 0)
      if (!StartRun()) return false;
    --left_;
    if (rle_) {
      *value = rle_value_;
      return true;
    }
    // Bit-packed: values LSB first, `width_` bits each.
    uint64_t bits = 0;
    const size_t first = static_cast<size_t>(bit_ / 8), shift = static_cast<size_t>(bit_ % 8);
    const size_t need = (shift + static_cast<size_t>(width_) + 7) / 8;
    for (size_t i = 0; i < need; ++i) bits |= static_cast<uint64_t>(static_cast<uint8_t>(packed_[first + i])) << (8 * i);
    *value = static_cast<uint32_t>((bits >> shift) & ((uint64_t{1} << width_) - 1));
    bit_ += static_cast<uint64_t>(width_);
    return true;
  }

 private:
  bool StartRun() {
    uint64_t header = 0;
    for (int shift = 0;; shift += 7) {
      if (p_ >= end_ || shift > 35) return false;
      const uint8_t b = static_cast<uint8_t>(*p_++);
      header |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) break;
    }
    if (header & 1) {  // bit-packed: (header >> 1) groups of 8 values
      const uint64_t groups = header >> 1;
      const uint64_t bytes = groups * static_cast<uint64_t>(width_);
      if (groups == 0) return true;
      // A final run may be cut short at the end of its data: keep the values whose bits are there.
      const uint64_t available = std::min<uint64_t>(bytes, static_cast<uint64_t>(end_ - p_));
      left_ = available * 8 / static_cast<uint64_t>(width_);
      if (left_ == 0) return false;
      rle_ = false;
      packed_ = p_;
      bit_ = 0;
      p_ += available;
      return true;
    }
    const size_t value_bytes = static_cast<size_t>((width_ + 7) / 8);
    if (static_cast<size_t>(end_ - p_) < value_bytes) return false;
    rle_value_ = 0;
    for (size_t i = 0; i < value_bytes; ++i) rle_value_ |= static_cast<uint32_t>(static_cast<uint8_t>(p_[i])) << (8 * i);
    p_ += value_bytes;
    left_ = header >> 1;
    rle_ = true;
    return true;
  }

  const char* p_;
  const char* end_;
  int width_;
  uint64_t left_ = 0;
  bool rle_ = true;
  uint32_t rle_value_ = 0;
  const char* packed_ = nullptr;
  uint64_t bit_ = 0;
};

// PLAIN BYTE_ARRAY values: a 4-byte little-endian length, then the bytes.
class PlainDecoder {
 public:
  explicit PlainDecoder(std::string_view data) : data_(data) {}
  bool Next(std::string_view* value) {
    if (data_.size() < 4) return false;
    uint32_t n = 0;
    std::memcpy(&n, data_.data(), 4);
    if (n > data_.size() - 4) return false;
    *value = data_.substr(4, n);
    data_.remove_prefix(4 + static_cast<size_t>(n));
    return true;
  }

 private:
  std::string_view data_;
};

// DELTA_BINARY_PACKED integers (parquet-format Encodings.md): a header
// <block size> <miniblocks per block> <value count> <first value>, then blocks
// of <min delta> <one bit width per miniblock> <miniblocks of bit-packed
// deltas>; value[i] = value[i-1] + min delta + delta[i], wrapping. Read one
// value at a time; end() is the byte after the last miniblock read.
class DeltaDecoder {
 public:
  explicit DeltaDecoder(std::string_view data) : data_(data) {
    const uint64_t block = Varint(), miniblocks = Varint();
    count_ = Varint();
    value_ = static_cast<uint64_t>(ZigZag(Varint()));
    if (block == 0 || block % 128 != 0 || block > (1 << 20) || miniblocks == 0 || block % miniblocks != 0 ||
        (block / miniblocks) % 32 != 0 || count_ > (uint64_t{1} << 40))
      ok_ = false;
    if (ok_) {
      per_miniblock_ = block / miniblocks;
      miniblocks_ = miniblocks;
    }
  }
  bool ok() const { return ok_; }
  uint64_t count() const { return count_; }
  size_t end() const { return pos_; }

  bool Next(int64_t* out) {
    if (!ok_ || emitted_ >= count_) return false;
    if (emitted_++ == 0) {
      *out = static_cast<int64_t>(value_);
      return true;
    }
    if (left_in_miniblock_ == 0 && !StartMiniblock()) return false;
    uint64_t delta = 0;
    for (int b = 0; b < width_; ++b, ++bit_) {
      const size_t byte = static_cast<size_t>(bit_ / 8);
      if (byte >= data_.size()) return ok_ = false;
      delta |= static_cast<uint64_t>((static_cast<uint8_t>(data_[byte]) >> (bit_ % 8)) & 1) << b;
    }
    --left_in_miniblock_;
    value_ += static_cast<uint64_t>(min_delta_) + delta;
    *out = static_cast<int64_t>(value_);
    return true;
  }

 private:
  uint64_t Varint() {
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
      if (pos_ >= data_.size()) return ok_ = false, 0;
      const uint8_t b = static_cast<uint8_t>(data_[pos_++]);
      v |= static_cast<uint64_t>(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
    return ok_ = false, 0;
  }
  static int64_t ZigZag(uint64_t n) { return static_cast<int64_t>(n >> 1) ^ -static_cast<int64_t>(n & 1); }

  bool StartMiniblock() {
    if (miniblock_ == miniblocks_ || widths_.empty()) {  // a new block
      min_delta_ = ZigZag(Varint());
      if (!ok_ || data_.size() - pos_ < miniblocks_) return ok_ = false;
      widths_.assign(data_.begin() + static_cast<std::ptrdiff_t>(pos_),
                     data_.begin() + static_cast<std::ptrdiff_t>(pos_ + miniblocks_));
      pos_ += miniblocks_;
      miniblock_ = 0;
    }
    width_ = static_cast<uint8_t>(widths_[miniblock_++]);
    if (width_ > 64) return ok_ = false;
    const uint64_t bytes = per_miniblock_ * static_cast<uint64_t>(width_) / 8;
    if (bytes > data_.size() - pos_) return ok_ = false;  // a miniblock is written whole, padded
    bit_ = pos_ * 8;
    pos_ += static_cast<size_t>(bytes);
    left_in_miniblock_ = per_miniblock_;
    return true;
  }

  std::string_view data_;
  size_t pos_ = 0;
  bool ok_ = true;
  uint64_t count_ = 0, emitted_ = 0, value_ = 0;
  uint64_t per_miniblock_ = 0, miniblocks_ = 0, miniblock_ = 0, left_in_miniblock_ = 0;
  int64_t min_delta_ = 0;
  int width_ = 0;
  uint64_t bit_ = 0;
  std::string widths_;
};

// DELTA_LENGTH_BYTE_ARRAY (the lengths delta-packed, then the bytes one after
// another) and DELTA_BYTE_ARRAY (prefix lengths delta-packed, then the
// suffixes as DELTA_LENGTH_BYTE_ARRAY; a value is the previous value's prefix
// plus its suffix). The streams' ends are found by a first pass over them, so
// that nothing is sized by the untrusted value counts; a stream that claims
// more than the page's `max_values` is corrupt (and not walked).
class DeltaStringDecoder {
 public:
  DeltaStringDecoder(std::string_view data, bool with_prefixes, int64_t max_values) {
    std::string_view lengths = data;
    if (with_prefixes) {
      if (!SkipToEnd(data, max_values, &lengths)) return;
      prefixes_.emplace(data);
    }
    if (!SkipToEnd(lengths, max_values, &bytes_)) return;
    lengths_.emplace(lengths);
    ok_ = true;
  }
  bool ok() const { return ok_; }

  bool Next(std::string_view* out) {
    int64_t length = 0, prefix = 0;
    if (!ok_ || !lengths_->Next(&length) || (prefixes_ && !prefixes_->Next(&prefix))) return false;
    if (length < 0 || static_cast<uint64_t>(length) > bytes_.size()) return false;
    if (!prefixes_) {
      *out = bytes_.substr(0, static_cast<size_t>(length));
      bytes_.remove_prefix(static_cast<size_t>(length));
      return true;
    }
    if (prefix < 0 || static_cast<uint64_t>(prefix) > previous_.size()) return false;
    previous_.resize(static_cast<size_t>(prefix));
    previous_.append(bytes_.data(), static_cast<size_t>(length));
    bytes_.remove_prefix(static_cast<size_t>(length));
    *out = previous_;
    return true;
  }

 private:
  // Reads every value of the stream at the start of `data`; *after* is what follows it.
  static bool SkipToEnd(std::string_view data, int64_t max_values, std::string_view* after) {
    DeltaDecoder d(data);
    if (d.count() > static_cast<uint64_t>(std::max<int64_t>(max_values, 0))) return false;
    int64_t v = 0;
    for (uint64_t i = 0; i < d.count(); ++i)
      if (!d.Next(&v)) return false;
    if (!d.ok()) return false;
    *after = data.substr(d.end());
    return true;
  }

  std::optional<DeltaDecoder> prefixes_, lengths_;
  std::string_view bytes_;
  std::string previous_;
  bool ok_ = false;
};

// Decodes one column chunk page by page.
class ChunkDecoder {
 public:
  ChunkDecoder(const ParquetTextReader::Chunk& chunk, bool optional, ParquetTextStats* stats)
      : chunk_(chunk), optional_(optional), stats_(stats) {}

  // Returns Ok(false) when on_document asked to stop.
  Result<bool> Run(std::string_view bytes, const std::function<bool(std::string_view)>& on_document) {
    size_t pos = 0;
    int64_t values = 0;
    for (int page = 0; values < chunk_.num_values; ++page) {
      where_ = fmt::format("page {}: ", page);
      if (pos >= bytes.size())
        return Status::Corruption(fmt::format("the column chunk ends after {} of its {} values", values, chunk_.num_values));
      T r(reinterpret_cast<const uint8_t*>(bytes.data() + pos), bytes.size() - pos);
      const PageHeader h = ReadPageHeader(r);
      if (!r.ok()) return Status::Corruption(where_ + "corrupt page header: " + r.error());
      pos += r.position();
      if (h.compressed_size < 0 || static_cast<uint64_t>(h.compressed_size) > bytes.size() - pos)
        return Status::Corruption(where_ + fmt::format("page of {} bytes runs past its column chunk", h.compressed_size));
      if (h.uncompressed_size < 0 || h.uncompressed_size > kMaxPageBytes)
        return Status::Corruption(where_ + fmt::format("page size {} is out of range", h.uncompressed_size));
      const std::string_view body = bytes.substr(pos, static_cast<size_t>(h.compressed_size));
      pos += static_cast<size_t>(h.compressed_size);
      Result<bool> more = true;
      switch (h.type) {
        case kDictionaryPage:
          if (Status s = Dictionary(h, body); !s.ok()) return s;
          break;
        case kDataPage:
        case kDataPageV2:
          if (h.num_values < 0 || h.num_values > chunk_.num_values - values)
            return Status::Corruption(where_ + fmt::format("page holds {} values, more than the {} left in the chunk",
                                                          h.num_values, chunk_.num_values - values));
          more = Data(h, body, on_document);
          if (!more.ok()) return more.status();
          values += h.num_values;
          if (!*more) return false;
          break;
        default:
          break;  // INDEX_PAGE, or a page type this reader does not know: not part of the values
      }
    }
    return true;
  }

 private:
  static constexpr int64_t kMaxPageBytes = int64_t{1} << 31;

  Status Decompressed(std::string_view in, int64_t size, std::string* out) {
    return Decompress(chunk_.codec, in, static_cast<size_t>(size), out).WithPrefix(where_);
  }

  Status Dictionary(const PageHeader& h, std::string_view body) {
    if (h.encoding != kPlain && h.encoding != kPlainDictionary)
      return Status::InvalidArgument(where_ + fmt::format("dictionary page encoded {}; expected PLAIN", EncodingName(h.encoding)));
    if (Status s = Decompressed(body, h.uncompressed_size, &dictionary_bytes_); !s.ok()) return s;
    dictionary_.clear();
    PlainDecoder plain(dictionary_bytes_);
    std::string_view v;
    for (int64_t i = 0; i < h.num_values; ++i) {
      if (!plain.Next(&v))
        return Status::Corruption(where_ + fmt::format("dictionary page ends after {} of its {} values", i, h.num_values));
      dictionary_.push_back(v);
    }
    stats_->dictionary_pages += 1;
    return Status::Ok();
  }

  Result<bool> Data(const PageHeader& h, std::string_view body, const std::function<bool(std::string_view)>& on_document) {
    std::string_view levels, values;
    if (h.type == kDataPage) {
      if (Status s = Decompressed(body, h.uncompressed_size, &page_); !s.ok()) return s;
      std::string_view page(page_);
      if (optional_) {
        if (h.def_encoding != kRle)
          return Status::InvalidArgument(where_ + fmt::format("definition levels encoded {}; the reader reads RLE",
                                                              EncodingName(h.def_encoding)));
        uint32_t n = 0;
        if (page.size() < 4) return Status::Corruption(where_ + "truncated definition levels");
        std::memcpy(&n, page.data(), 4);
        if (n > page.size() - 4) return Status::Corruption(where_ + "definition levels run past the page");
        levels = page.substr(4, n);
        page.remove_prefix(4 + static_cast<size_t>(n));
      }
      values = page;
    } else {
      if (h.v2_def_bytes < 0 || h.v2_rep_bytes < 0 || h.v2_def_bytes + h.v2_rep_bytes > static_cast<int64_t>(body.size()) ||
          h.v2_def_bytes + h.v2_rep_bytes > h.uncompressed_size)
        return Status::Corruption(where_ + "level lengths run past the page");
      if (h.v2_rep_bytes != 0) return Status::InvalidArgument(where_ + "the page has repetition levels (a repeated column)");
      levels = body.substr(0, static_cast<size_t>(h.v2_def_bytes));
      const std::string_view rest = body.substr(static_cast<size_t>(h.v2_def_bytes));
      const int64_t values_size = h.uncompressed_size - h.v2_def_bytes;
      if (h.v2_compressed) {
        if (Status s = Decompressed(rest, values_size, &page_); !s.ok()) return s;
        values = page_;
      } else {
        if (static_cast<int64_t>(rest.size()) != values_size) return Status::Corruption(where_ + "page size mismatch");
        values = rest;
      }
    }
    stats_->data_pages += 1;
    const bool dictionary = h.encoding == kPlainDictionary || h.encoding == kRleDictionary;
    const bool delta = h.encoding == kDeltaLengthByteArray || h.encoding == kDeltaByteArray;
    if (!dictionary && !delta && h.encoding != kPlain)
      return Status::InvalidArgument(where_ + fmt::format("values encoded {}; {}", EncodingName(h.encoding), kReadsEncodings));
    (dictionary ? stats_->dictionary_encoded_pages : delta ? stats_->delta_pages : stats_->plain_pages) += 1;
    HybridDecoder defined(levels, optional_ ? 1 : 0);
    PlainDecoder plain(values);
    std::optional<DeltaStringDecoder> deltas;
    if (delta) {
      deltas.emplace(values, h.encoding == kDeltaByteArray, h.num_values);
      if (!deltas->ok()) return Status::Corruption(where_ + "corrupt " + EncodingName(h.encoding) + " header");
    }
    int width = 0;
    if (dictionary) {
      if (values.empty() && h.num_values > 0) {
        // A page of nulls only may carry no index data at all.
      } else if (!values.empty()) {
        width = static_cast<uint8_t>(values[0]);
        if (width > 32) return Status::Corruption(where_ + fmt::format("dictionary index bit width {}", width));
        values.remove_prefix(1);
      }
    }
    HybridDecoder indices(values, width);
    for (int64_t i = 0; i < h.num_values; ++i) {
      uint32_t level = 1;
      if (optional_ && !defined.Next(&level))
        return Status::Corruption(where_ + fmt::format("definition levels end after {} of {} values", i, h.num_values));
      if (level == 0) {
        stats_->nulls += 1;
        continue;
      }
      std::string_view text;
      if (dictionary) {
        uint32_t index = 0;
        if (!indices.Next(&index))
          return Status::Corruption(where_ + fmt::format("dictionary indices end after {} of {} values", i, h.num_values));
        if (index >= dictionary_.size())
          return Status::Corruption(where_ + fmt::format("dictionary index {} out of {} entries", index, dictionary_.size()));
        text = dictionary_[index];
      } else if (delta ? !deltas->Next(&text) : !plain.Next(&text)) {
        return Status::Corruption(where_ + fmt::format("values end after {} of {}", i, h.num_values));
      }
      stats_->documents += 1;
      stats_->text_bytes += static_cast<int64_t>(text.size());
      if (!on_document(text)) return false;
    }
    return true;
  }

  const ParquetTextReader::Chunk& chunk_;
  const bool optional_;
  ParquetTextStats* stats_;
  std::string where_;
  std::string page_, dictionary_bytes_;
  std::vector<std::string_view> dictionary_;
};

}  // namespace

Result<ParquetTextReader> ParquetTextReader::Open(const std::string& path, const std::string& column_or_default) {
  const std::string column = column_or_default.empty() ? kParquetDefaultColumn : column_or_default;
  ParquetTextReader reader;
  reader.column_ = column;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    for (const auto& entry : fs::directory_iterator(path, ec))
      if (entry.is_regular_file() && entry.path().extension() == ".parquet") reader.files_.push_back(entry.path().string());
    std::sort(reader.files_.begin(), reader.files_.end());
    if (reader.files_.empty()) return Status::NotFound(fmt::format("{}: the directory holds no .parquet files", path));
  } else if (fs::is_regular_file(path, ec)) {
    reader.files_.push_back(path);
  } else {
    return Status::NotFound(fmt::format("{}: no such dataset file or directory", path));
  }
  for (const std::string& file : reader.files_) {
    auto footer = ReadFooter(file, column, &reader.stats_);
    if (!footer.ok()) return footer.status().WithPrefix(file + ": ");
    reader.layout_.push_back(std::move(*footer));
  }
  return reader;
}

Status ParquetTextReader::ForEach(const std::function<bool(std::string_view)>& on_document) {
  std::string bytes;
  for (const File& file : layout_) {
    std::ifstream in(file.path, std::ios::binary);
    if (!in) return Status::NotFound(fmt::format("{}: cannot open the file", file.path));
    for (size_t g = 0; g < file.chunks.size(); ++g) {
      const Chunk& chunk = file.chunks[g];
      const std::string where = fmt::format("{}: row group {} of {}: ", file.path, g, file.chunks.size());
      bytes.resize(static_cast<size_t>(chunk.size));
      in.clear();
      in.seekg(chunk.offset);
      in.read(bytes.data(), chunk.size);
      if (in.gcount() != chunk.size) return Status::IoError(where + "cannot read the column chunk (truncated file?)");
      ChunkDecoder decoder(chunk, file.optional, &stats_);
      Result<bool> more = decoder.Run(bytes, on_document);
      if (!more.ok()) return more.status().WithPrefix(where);
      if (!*more) return Status::Ok();
    }
  }
  return Status::Ok();
}

}  // namespace native
}  // namespace protocol
