// Reading a parquet text column against tokenizing it (bench/parquet.sh):
// MB/s of text the reader (training/parquet.h) delivers from a file, and
// MB/s the SentencePiece tokenizer encodes of the same documents, each on
// one thread. Reading must never be what a training step waits for.
//
//   protocol_parquet_bench --file F.parquet --tokenizer tokenizer.model [--tokenize-mb 32]
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/native/model/tokenizer.h"
#include "backends/native/training/parquet.h"
#include "bench_args.h"

using protocol::native::ParquetTextReader;

namespace {
double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  std::string file, tokenizer_path;
  double tokenize_mb = 32;
  for (BenchArgs args(argc, argv); args.Next();) {
    if (args.flag() == "--file") file = args.Value();
    else if (args.flag() == "--tokenizer") tokenizer_path = args.Value();
    else if (args.flag() == "--tokenize-mb") tokenize_mb = std::stod(args.Value());
    else {
      std::fprintf(stderr, "unknown flag %s\n", args.flag().c_str());
      return 2;
    }
  }
  if (file.empty() || tokenizer_path.empty()) {
    std::fprintf(stderr, "usage: protocol_parquet_bench --file F.parquet --tokenizer tokenizer.model [--tokenize-mb N]\n");
    return 2;
  }
  // Read: three passes, the best one (the file is in the page cache after the first).
  double best = 1e30;
  protocol::native::ParquetTextStats stats;
  for (int pass = 0; pass < 3; ++pass) {
    auto reader = ParquetTextReader::Open(file);
    if (!reader.ok()) {
      std::fprintf(stderr, "%s\n", reader.status().message().c_str());
      return 1;
    }
    // Each document copied out, as data_load does before tokenizing it.
    size_t checksum = 0;
    std::string copy;
    const double t0 = Now();
    protocol::Status s = reader->ForEach([&](std::string_view text) {
      copy.assign(text);
      checksum += copy.size() ? static_cast<unsigned char>(copy[copy.size() / 2]) : 0;
      return true;
    });
    const double t = Now() - t0;
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.message().c_str());
      return 1;
    }
    if (t < best) best = t;
    stats = reader->stats();
    if (checksum == 1) std::printf(" ");  // keep the loop
  }
  const double text_mb = static_cast<double>(stats.text_bytes) / 1e6;
  std::printf("read:     %.1f MB of text, %lld documents, %lld row groups, %lld data pages (%lld dictionary-encoded) "
              "in %.3f s: %.0f MB/s\n",
              text_mb, static_cast<long long>(stats.documents), static_cast<long long>(stats.row_groups),
              static_cast<long long>(stats.data_pages), static_cast<long long>(stats.dictionary_encoded_pages), best,
              text_mb / best);

  // Tokenize: the first --tokenize-mb of the same documents.
  auto tok = protocol::native::LoadSentencePieceTokenizer(tokenizer_path);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().message().c_str());
    return 1;
  }
  std::vector<std::string> docs;
  double bytes = 0;
  auto reader = ParquetTextReader::Open(file);
  reader->ForEach([&](std::string_view text) {
    docs.emplace_back(text);
    bytes += static_cast<double>(text.size());
    return bytes < tokenize_mb * 1e6;
  });
  size_t tokens = 0;
  const double t0 = Now();
  for (const std::string& d : docs) tokens += (*tok)->Encode(d).size();
  const double t = Now() - t0;
  std::printf("tokenize: %.1f MB of the same text, %zu tokens in %.3f s: %.1f MB/s (%.0f tokens/s)\n", bytes / 1e6,
              tokens, t, bytes / 1e6 / t, static_cast<double>(tokens) / t);
  std::printf("reading is %.0fx faster than tokenizing\n", (text_mb / best) / (bytes / 1e6 / t));
  return 0;
}
