#ifndef PROTOCOL_TESTS_TEST_FILES_H_
#define PROTOCOL_TESTS_TEST_FILES_H_

// File helpers shared by tests (no doctest here: callers REQUIRE on results).

#include <fstream>
#include <sstream>
#include <string>

namespace protocol::testing {

// The whole file, or "" when it cannot be read.
inline std::string ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

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

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_TEST_FILES_H_
