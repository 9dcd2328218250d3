#ifndef PROTOCOL_TESTS_TEST_FILES_H_
#define PROTOCOL_TESTS_TEST_FILES_H_

// File helpers shared by tests: a fresh temporary directory, reading and
// writing whole files. No doctest here: callers REQUIRE on results.

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <system_error>

namespace protocol::testing {

// The whole file, or "" when it cannot be read.
inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}
inline std::string ReadAll(const std::filesystem::path& path) { return ReadTextFile(path.string()); }

// Writes `text` to `path`, creating its parent directories.
inline void WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::error_code ec;
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path(), ec);
  std::ofstream(path, std::ios::binary) << text;
}

// A fresh directory under the system's temporary directory, named
// protocol-<tag>-XXXXXX (canonical path: no symlinks), removed with
// everything in it when the object goes. `path` is empty when it could not be
// made.
struct TempDir {
  explicit TempDir(const std::string& tag = "test") {
    std::string pattern = (std::filesystem::temp_directory_path() / ("protocol-" + tag + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data()) != nullptr) path = std::filesystem::canonical(pattern);
  }
  ~TempDir() {
    std::error_code ec;
    if (!path.empty()) std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path.string(); }

  std::filesystem::path path;
};

// The body of the first ```yaml fenced block of a Markdown document, or ""
// when there is none (docs examples are tested as real inputs).
inline std::string FirstYamlBlock(const std::string& markdown) {
  const std::string fence = "```yaml\n";
  size_t start = markdown.find(fence);
  if (start == std::string::npos) return "";
  start += fence.size();
  size_t end = markdown.find("```", start);
  return end == std::string::npos ? "" : markdown.substr(start, end - start);
}

// `s` as one word for /bin/sh, in single quotes.
inline std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_TEST_FILES_H_
