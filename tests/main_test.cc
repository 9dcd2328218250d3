// The doctest main for protocol_tests, and the skip bookkeeping of
// tests/support/skip.h: a listener follows which test case runs, DeclareSkip marks
// it, and main() turns "every case that ran was skipped" into kSkipExitCode.

#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

#include "skip.h"

namespace protocol {
namespace testing {
namespace {

struct Bookkeeping {
  std::mutex mu;
  std::string current;                       // the test case running now
  int started = 0;                           // test cases started
  std::map<std::string, std::string> skips;  // test case → reason
};

Bookkeeping& Book() {
  static Bookkeeping book;
  return book;
}

// Follows test case starts; everything else is left to the real reporters.
struct SkipListener : public doctest::IReporter {
  explicit SkipListener(const doctest::ContextOptions&) {}
  void report_query(const doctest::QueryData&) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats&) override {}
  void test_case_start(const doctest::TestCaseData& data) override {
    std::lock_guard<std::mutex> lock(Book().mu);
    Book().current = data.m_name;
    ++Book().started;
  }
  void test_case_reenter(const doctest::TestCaseData&) override {}
  void test_case_end(const doctest::CurrentTestCaseStats&) override {}
  void test_case_exception(const doctest::TestCaseException&) override {}
  void subcase_start(const doctest::SubcaseSignature&) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData&) override {}
  void log_message(const doctest::MessageData&) override {}
  void test_case_skipped(const doctest::TestCaseData&) override {}
};

REGISTER_LISTENER("protocol-skips", 1, SkipListener);

// True when the command line selects test files (how ctest runs each file).
bool FilteredBySourceFile(int argc, char** argv) {
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--source-file", 13) == 0 || std::strncmp(argv[i], "-sf", 3) == 0 ||
        std::strncmp(argv[i], "--dt-source-file", 16) == 0)
      return true;
  return false;
}

}  // namespace

void DeclareSkip(const std::string& reason) {
  std::lock_guard<std::mutex> lock(Book().mu);
  Book().skips[Book().current] = reason;
  std::printf("SKIPPED: %s: %s\n", Book().current.c_str(), reason.c_str());
  std::fflush(stdout);
}

}  // namespace testing
}  // namespace protocol

int main(int argc, char** argv) {
  using protocol::testing::Book;
  doctest::Context context(argc, argv);
  const int result = context.run();
  if (context.shouldExit() || Book().skips.empty()) return result;
  const int skipped = static_cast<int>(Book().skips.size());
  const int started = Book().started;
  std::printf("protocol_tests: %d of %d test case%s skipped (cannot run here)\n", skipped, started,
              started == 1 ? "" : "s");
  if (result != 0) return result;  // a failure is never turned into a skip
  if (skipped == started) return protocol::testing::kSkipExitCode;
  if (protocol::testing::FilteredBySourceFile(argc, argv)) {
    std::printf("protocol_tests: a skipped test case shares its file with cases that ran, so ctest "
                "would show the skip as a pass; move it to a file of its own\n");
    return 1;
  }
  return result;
}
