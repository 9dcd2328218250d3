// libFuzzer target of the parquet reader (training/parquet.h): every input is
// written to a file and read through Open and ForEach; any crash, sanitizer
// report or hang is a bug. Built and run by scripts/fuzz-parquet.sh.
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <string>

#include "backends/native/training/parquet.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/dev/shm/protocol_parquet_fuzz_" + std::to_string(getpid()) + ".parquet";
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  auto reader = protocol::native::ParquetTextReader::Open(path);
  if (reader.ok()) (void)reader->ForEach([](std::string_view) { return true; });
  return 0;
}
