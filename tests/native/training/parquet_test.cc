// parquet.h: the text column of files written by independent writers
// (tests/data/parquet, made by scripts/make-parquet-fixtures.sh with arrow-rs
// through parquet-wasm and with hyparquet-writer) reads back as the jsonl
// corpus they were made from; bad files give located errors, never a crash.
#include <doctest/doctest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "backends/native/training/decompress.h"
#include "backends/native/training/parquet.h"
#include "backends/native/training/thrift_compact.h"
#include "runner/base/json.h"

namespace protocol {
namespace native {
namespace {
namespace fs = std::filesystem;

const std::string kDir = std::string(PROTOCOL_SOURCE_DIR) + "/tests/data/parquet/";

std::vector<std::string> CorpusDocuments() {
  std::ifstream in(kDir + "corpus.jsonl");
  std::vector<std::string> docs;
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) docs.push_back(Json::parse(line)["text"].get<std::string>());
  return docs;
}

struct Read {
  std::vector<std::string> docs;
  ParquetTextStats stats;
  Status status;
};

Read ReadAll(const std::string& path, const std::string& column = "text") {
  Read r;
  auto reader = ParquetTextReader::Open(path, column);
  if (!reader.ok()) {
    r.status = reader.status();
    return r;
  }
  r.status = reader->ForEach([&](std::string_view text) {
    r.docs.emplace_back(text);
    return true;
  });
  r.stats = reader->stats();
  return r;
}

std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

struct TempParquet {
  std::string path;
  explicit TempParquet(const std::string& bytes, const std::string& name = "parquet_test")
      : path((fs::temp_directory_path() / (name + "_" + std::to_string(getpid()) + ".parquet")).string()) {
    std::ofstream(path, std::ios::binary) << bytes;
  }
  ~TempParquet() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

TEST_CASE("parquet: every codec, page version and value encoding reads back as the jsonl corpus") {
  const std::vector<std::string> corpus = CorpusDocuments();
  REQUIRE(corpus.size() == 40);
  struct Fixture {
    const char* file;
    int row_groups;
    bool dictionary, plain, delta;  // value encodings its data pages must use
    int64_t nulls;
  };
  const Fixture fixtures[] = {
      {"plain-uncompressed-v1.parquet", 3, false, true, false, 0},
      {"dict-snappy-v1.parquet", 3, true, false, false, 0},
      {"dict-zstd-v2.parquet", 3, true, false, false, 0},
      {"plain-gzip-v2.parquet", 3, false, true, false, 0},
      {"nulls-snappy-v1.parquet", 4, true, false, false, 10},
      {"nulls-gzip-v2.parquet", 4, false, true, false, 10},
      {"delta-byte-array-zstd-v2.parquet", 4, false, false, true, 10},
      {"delta-length-snappy-v1.parquet", 3, false, false, true, 0},
      {"hyparquet-snappy.parquet", 3, false, true, false, 0},
      {"hyparquet-nulls-uncompressed.parquet", 1, false, true, false, 10},
  };
  for (const Fixture& f : fixtures) {
    CAPTURE(std::string(f.file));
    Read r = ReadAll(kDir + f.file);
    REQUIRE_MESSAGE(r.status.ok(), r.status.message());
    CHECK(r.docs == corpus);
    CHECK(r.stats.files == 1);
    CHECK(r.stats.row_groups == f.row_groups);
    CHECK(r.stats.rows == 40 + f.nulls);
    CHECK(r.stats.documents == 40);
    CHECK(r.stats.nulls == f.nulls);
    CHECK((r.stats.dictionary_encoded_pages > 0) == f.dictionary);
    CHECK((r.stats.plain_pages > 0) == f.plain);
    CHECK((r.stats.delta_pages > 0) == f.delta);
    CHECK((r.stats.dictionary_pages > 0) == f.dictionary);
    int64_t bytes = 0;
    for (const std::string& d : corpus) bytes += static_cast<int64_t>(d.size());
    CHECK(r.stats.text_bytes == bytes);
  }
}

TEST_CASE("parquet: a chunk that falls back from dictionary to PLAIN pages part-way through") {
  // 30,000 distinct documents overflow the writer's 1 MB dictionary page (make.mjs).
  std::vector<std::string> many;
  for (int i = 0; i < 30000; ++i) {
    std::string d = "document " + std::to_string(i) + " ";
    for (int k = 0; k < i % 10; ++k) d += "lorem ipsum ";
    many.push_back(d);
  }
  for (std::string file : {"fallback-zstd-v1.parquet", "fallback-zstd-v2.parquet"}) {
    CAPTURE(file);
    Read r = ReadAll(kDir + file);
    REQUIRE_MESSAGE(r.status.ok(), r.status.message());
    CHECK(r.docs == many);
    CHECK(r.stats.row_groups == 1);
    CHECK(r.stats.dictionary_encoded_pages > 0);
    CHECK(r.stats.plain_pages > 0);
  }
}

TEST_CASE("parquet: dictionary indices of bit width 0 (one distinct value)") {
  Read r = ReadAll(kDir + "one-value-snappy-v1.parquet");
  REQUIRE_MESSAGE(r.status.ok(), r.status.message());
  CHECK(r.docs == std::vector<std::string>(9, "the same document"));
}

TEST_CASE("parquet: a folder is its *.parquet files in name order; ForEach stops when asked") {
  Read r = ReadAll(kDir + "folder");
  REQUIRE_MESSAGE(r.status.ok(), r.status.message());
  CHECK(r.docs == CorpusDocuments());
  CHECK(r.stats.files == 2);  // _SUCCESS is not read
  CHECK(r.stats.row_groups == 4);

  auto reader = ParquetTextReader::Open(kDir + "dict-snappy-v1.parquet");
  REQUIRE(reader.ok());
  int seen = 0;
  REQUIRE(reader->ForEach([&](std::string_view) { return ++seen < 5; }).ok());
  CHECK(seen == 5);
  CHECK(reader->stats().documents == 5);
}

TEST_CASE("parquet: unsupported features and missing columns are errors naming the file") {
  const std::string brotli = kDir + "brotli.parquet";
  auto r = ParquetTextReader::Open(brotli);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == brotli + ": row group 0 of 1: column 'text' is compressed with BROTLI; the reader "
                                         "supports UNCOMPRESSED, SNAPPY, GZIP and ZSTD");

  // A value encoding the reader does not read: the footer's encodings of the
  // text column, list<i32> [RLE, DELTA_LENGTH_BYTE_ARRAY] = 0x25 0x06 0x0c
  // (zigzag), made [RLE, BYTE_STREAM_SPLIT] (0x12) in the first row group.
  std::string patched = Bytes(kDir + "delta-length-snappy-v1.parquet");
  const size_t list = patched.find(std::string("\x25\x06\x0c", 3), patched.size() / 2);
  REQUIRE(list != std::string::npos);
  patched[list + 2] = '\x12';
  TempParquet split(patched);
  r = ParquetTextReader::Open(split.path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == split.path + ": row group 0 of 3: column 'text' is encoded BYTE_STREAM_SPLIT; the "
                                             "reader reads PLAIN, PLAIN_DICTIONARY, RLE_DICTIONARY, "
                                             "DELTA_LENGTH_BYTE_ARRAY and DELTA_BYTE_ARRAY values");

  const std::string nested = kDir + "nested-list.parquet";
  r = ParquetTextReader::Open(nested);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == nested + ": column 'text' is nested (a group); the reader reads a top-level string column");

  const std::string plain = kDir + "plain-uncompressed-v1.parquet";
  r = ParquetTextReader::Open(plain, "body");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() ==
        plain + ": no column 'body' (the file has: id, text, url, score, token_count); set the dataset's `column:`");
  r = ParquetTextReader::Open(plain, "score");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == plain + ": column 'score' is DOUBLE, not a string (BYTE_ARRAY)");
  // Another string column of the same file reads.
  Read urls = ReadAll(plain, "url");
  REQUIRE(urls.status.ok());
  CHECK(urls.docs.size() == 40);
  CHECK(urls.docs[7] == "https://example.org/7");

  std::string encrypted = Bytes(plain);
  encrypted.replace(encrypted.size() - 4, 4, "PARE");
  TempParquet e(encrypted);
  r = ParquetTextReader::Open(e.path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == e.path + ": the file is encrypted (PARE footer); encrypted parquet is not supported");

  r = ParquetTextReader::Open(kDir + "no-such.parquet");
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == kDir + "no-such.parquet: no such dataset file or directory");
}

TEST_CASE("parquet: a truncated file is located; a damaged page names its row group and page") {
  const std::string good = Bytes(kDir + "dict-snappy-v1.parquet");
  TempParquet cut(good.substr(0, good.size() / 2));
  auto r = ParquetTextReader::Open(cut.path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message() == cut.path + ": not a parquet file (no PAR1 magic at both ends; truncated?)");

  // Damage the first data page's bytes (after the dictionary page) of row group 0.
  const std::string plain = Bytes(kDir + "plain-uncompressed-v1.parquet");
  std::string damaged = plain;
  const size_t at = damaged.find("https://");  // inside the url column, not text: still reads
  REQUIRE(at != std::string::npos);
  damaged[at] = 'X';
  TempParquet other(damaged);
  CHECK(ReadAll(other.path).status.ok());
  // A PLAIN length prefix inside the text column's first page made huge.
  const std::vector<std::string> corpus = CorpusDocuments();
  const size_t doc = plain.find(corpus[0]);
  REQUIRE(doc != std::string::npos);
  damaged = plain;
  damaged[doc - 1] = '\x7f';  // the high byte of the 4-byte little-endian length
  TempParquet broken(damaged);
  Read bad = ReadAll(broken.path);
  REQUIRE_FALSE(bad.status.ok());
  CHECK(bad.status.message() == broken.path + ": row group 0 of 3: page 0: values end after 0 of 16");
}

// Random truncations and bit flips of every fixture: each read ends in Ok or
// a located error, never a crash or a hang (run under the sanitizers by
// scripts/fuzz-parquet.sh for more iterations).
TEST_CASE("parquet: truncated and bit-flipped files never crash the reader") {
  std::mt19937_64 rng(20261126);
  int errors = 0, reads = 0;
  for (const auto& entry : fs::directory_iterator(kDir)) {
    if (entry.path().extension() != ".parquet") continue;
    const std::string original = Bytes(entry.path().string());
    for (int i = 0; i < 60; ++i) {
      std::string bytes = original;
      if (i % 3 == 0) {
        bytes.resize(rng() % bytes.size());
      } else {
        const int flips = 1 + static_cast<int>(rng() % 8);
        for (int f = 0; f < flips; ++f) bytes[rng() % bytes.size()] ^= static_cast<char>(1 << (rng() % 8));
      }
      TempParquet t(bytes, "parquet_fuzz");
      Read r = ReadAll(t.path);
      ++reads;
      if (!r.status.ok()) {
        ++errors;
        CHECK(r.status.message().rfind(t.path + ": ", 0) == 0);  // names the file
      }
    }
  }
  CHECK(reads > 500);
  CHECK(errors > reads / 4);  // the damage is seen, not read as text
}

TEST_CASE("thrift compact: fields by delta and by explicit id, nested structs, unknown fields skipped") {
  // struct { 1: i32 -3, 5: binary "ab", 20 (explicit id): struct { 1: true }, 21: list<i64> [1, 2] }
  const uint8_t bytes[] = {0x15, 0x05,                 // field 1 (delta 1), i32 zigzag(-3) = 5
                           0x48, 0x02, 'a', 'b',       // field 5 (delta 4), binary
                           0x0c, 0x28,                 // field 20 (explicit, zigzag 40), struct
                           0x11, 0x00,                 //   field 1 true, stop
                           0x19, 0x26, 0x02, 0x04,     // field 21 (delta 1), list of 2 i64: 1, 2
                           0x00};
  CompactReader r(bytes, sizeof bytes);
  r.BeginStruct();
  int16_t id = 0;
  uint8_t type = 0;
  REQUIRE(r.NextField(&id, &type));
  CHECK(id == 1);
  CHECK(r.ReadInt(type) == -3);
  REQUIRE(r.NextField(&id, &type));
  CHECK(id == 5);
  CHECK(r.ReadBinary(type) == "ab");
  REQUIRE(r.NextField(&id, &type));
  CHECK(id == 20);
  r.Skip(type);
  REQUIRE(r.NextField(&id, &type));
  CHECK(id == 21);
  uint8_t element = 0;
  CHECK(r.ReadListHeader(type, &element) == 2);
  CHECK(r.ReadInt(element) == 1);
  CHECK(r.ReadInt(element) == 2);
  CHECK_FALSE(r.NextField(&id, &type));
  r.EndStruct();
  CHECK(r.ok());
  CHECK(r.position() == sizeof bytes);

  CompactReader cut(bytes, 3);  // truncated inside the binary
  cut.BeginStruct();
  REQUIRE(cut.NextField(&id, &type));
  cut.ReadInt(type);
  REQUIRE(cut.NextField(&id, &type));
  CHECK(cut.ReadBinary(type).empty());
  CHECK_FALSE(cut.ok());
  CHECK(cut.error() == "truncated (at byte 3)");
}

TEST_CASE("decompress: a size other than the page header's is corruption") {
  std::string out;
  CHECK(Decompress(Codec::kUncompressed, "abc", 3, &out).ok());
  CHECK(out == "abc");
  Status s = Decompress(Codec::kUncompressed, "abc", 4, &out);
  CHECK(s.code() == Status::Code::kCorruption);
  CHECK(s.message() == "UNCOMPRESSED data decompressed to 3 bytes, the page header says 4");
  CHECK(Decompress(Codec::kZstd, "not zstd", 10, &out).code() == Status::Code::kCorruption);
  CHECK(Decompress(Codec::kGzip, "not gzip", 10, &out).code() == Status::Code::kCorruption);
  CHECK(Decompress(Codec::kSnappy, "", 10, &out).code() == Status::Code::kCorruption);
}

}  // namespace native
}  // namespace protocol
