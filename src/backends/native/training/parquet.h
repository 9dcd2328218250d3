#ifndef PROTOCOL_BACKENDS_NATIVE_TRAINING_PARQUET_H_
#define PROTOCOL_BACKENDS_NATIVE_TRAINING_PARQUET_H_

// A reader of one text column of parquet files (the format fineweb-edu ships
// in), on Debian's codecs alone (decompress.h): no libarrow, no libparquet.
// It reads what the specification (apache/parquet-format, parquet.thrift)
// calls a top-level REQUIRED or OPTIONAL BYTE_ARRAY column:
//
//   footer    "PAR1" … FileMetaData (thrift compact, thrift_compact.h) · length · "PAR1"
//   layout    row groups → the column's chunk, from its dictionary page when it has one
//   pages     DATA_PAGE (v1: levels and values compressed together) and
//             DATA_PAGE_V2 (levels uncompressed, values compressed when is_compressed);
//             INDEX_PAGE and unknown page types are skipped
//   values    PLAIN (4-byte length + bytes), PLAIN_DICTIONARY / RLE_DICTIONARY
//             (a bit-width byte, then RLE / bit-packed hybrid indices into the
//             chunk's dictionary page), or DELTA_LENGTH_BYTE_ARRAY /
//             DELTA_BYTE_ARRAY (what v2 writers of arrow-rs and parquet-mr
//             emit without a dictionary); a chunk may fall back from
//             dictionary to PLAIN or delta pages part-way through
//   nulls     definition levels of an OPTIONAL column (RLE hybrid, bit width 1):
//             a null is skipped and counted
//   codecs    UNCOMPRESSED, SNAPPY, GZIP, ZSTD
//
// Everything else (another codec or value encoding, a nested or repeated
// column, an encrypted file) is an error that names the file and row group;
// so is a truncated or corrupt file. Input is untrusted: no read goes past
// its buffer, no allocation is sized by an unchecked field.
//
// Memory: one column chunk's compressed bytes, one decompressed page and the
// chunk's dictionary at a time — never a whole file.

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "backends/native/training/decompress.h"
#include "runner/base/status.h"

namespace protocol {
namespace native {

inline constexpr const char* kParquetDefaultColumn = "text";

struct ParquetTextStats {
  int64_t files = 0, row_groups = 0, rows = 0;  // from the footers (Open)
  int64_t documents = 0;  // non-null values delivered (ForEach)
  int64_t nulls = 0;      // null values skipped
  int64_t text_bytes = 0;  // bytes of the documents delivered
  int64_t data_pages = 0, dictionary_pages = 0;
  int64_t plain_pages = 0, dictionary_encoded_pages = 0, delta_pages = 0;  // data pages by value encoding
};

class ParquetTextReader {
 public:
  // A parquet file, or a directory's *.parquet files in name order (other
  // files are ignored). Reads and checks every footer: the column exists at
  // the top level, is a string (BYTE_ARRAY) and not repeated, and every chunk
  // of it uses a supported codec. An empty column is kParquetDefaultColumn.
  static Result<ParquetTextReader> Open(const std::string& path, const std::string& column = kParquetDefaultColumn);

  const std::vector<std::string>& files() const { return files_; }
  const std::string& column() const { return column_; }
  // Counts from the footers, then from the documents ForEach delivered.
  const ParquetTextStats& stats() const { return stats_; }

  // Calls on_document(text) for every non-null value, in file, row-group and
  // row order; returns Ok early when on_document returns false. The view is
  // valid during the call only. Errors name the file, row group and page.
  Status ForEach(const std::function<bool(std::string_view)>& on_document);

  // What Open learned of one column chunk (public for the reader's .cc only).
  struct Chunk {
    int64_t offset = 0, size = 0;  // the chunk's bytes: from its dictionary page, or first data page
    int64_t num_values = 0;        // values including nulls
    Codec codec = Codec::kUncompressed;
  };
  struct File {
    std::string path;
    bool optional = false;  // definition levels (max 1) precede the values
    std::vector<Chunk> chunks;  // one per row group
  };

 private:
  std::string column_;
  std::vector<std::string> files_;
  std::vector<File> layout_;
  ParquetTextStats stats_;
};

}  // namespace native
}  // namespace protocol

#endif  // PROTOCOL_BACKENDS_NATIVE_TRAINING_PARQUET_H_
