// The skip bookkeeping of tests/support/skip.h, through this very test binary run as
// ctest runs it: a file whose every case declares a skip exits 77 (ctest's
// SKIP_RETURN_CODE), a skip beside a case that ran fails under a
// --source-file filter, and the reason is printed. The two demonstration
// cases are marked doctest::skip() so that only this test runs them.

#include <doctest/doctest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli_support.h"
#include "skip.h"

using namespace protocol::testing;

TEST_CASE("skip helper demo: a case that declares a skip" * doctest::skip()) {
  CHECK(1 + 1 == 2);  // checks made before the skip still count
  SKIP_TEST("a demonstration of SKIP_TEST");
}

TEST_CASE("skip helper demo: a case that runs" * doctest::skip()) { CHECK(true); }

namespace {

struct Run {
  int exit_code;
  std::string out;
};

Run Self(const std::string& args) {
  TempDir dir;
  const std::string out = (dir.path / "out").string();
  const std::string cmd = "/proc/" + std::to_string(getpid()) + "/exe --no-version --no-skip " + args + " >" +
                          ShellQuote(out) + " 2>&1";
  int status = std::system(cmd.c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadAll(out)};
}

}  // namespace

TEST_CASE("skip helper: all skipped exits 77; a skip beside a case that ran fails under ctest, not elsewhere") {
  Run skipped = Self("--source-file='*/skip_test.cc' --test-case='skip helper demo: a case that declares a skip'");
  CHECK(skipped.exit_code == kSkipExitCode);
  INFO(skipped.out);
  CHECK(skipped.out.find("\nSKIPPED: skip helper demo: a case that declares a skip: a demonstration of SKIP_TEST\n") !=
        std::string::npos);
  CHECK(skipped.out.find("\nprotocol_tests: 1 of 1 test case skipped (cannot run here)\n") != std::string::npos);

  Run mixed = Self("--source-file='*/skip_test.cc' --test-case='skip helper demo: *'");
  CHECK(mixed.exit_code == 1);
  CHECK(mixed.out.find("\nprotocol_tests: 1 of 2 test cases skipped (cannot run here)\n"
                       "protocol_tests: a skipped test case shares its file with cases that ran, so ctest would "
                       "show the skip as a pass; move it to a file of its own\n") != std::string::npos);

  Run everything = Self("--test-case='skip helper demo: *'");  // a developer's run of several files
  CHECK(everything.exit_code == 0);

  Run none = Self("--source-file='*/skip_test.cc' --test-case='skip helper demo: a case that runs'");
  CHECK(none.exit_code == 0);
  CHECK(none.out.find("SKIPPED") == std::string::npos);
}
