#ifndef PROTOCOL_TESTS_SKIP_H_
#define PROTOCOL_TESTS_SKIP_H_

// A test case that cannot run on this machine (no Slurm, no network
// namespaces, no GPU, no python3) says so with SKIP_TEST("reason") and
// returns; it never passes silently. ctest then shows its file as SKIPPED:
// tests/main_test.cc exits with kSkipExitCode when every test case that ran
// in the process declared a skip and none failed, and CMakeLists.txt sets
// SKIP_RETURN_CODE to it for every test file. A file mixing cases that ran
// with cases that skipped would hide the skip behind a pass, so under ctest
// (a --source-file filter) the process fails instead and names the file to
// split: a skip sits in a file of its own, beside the cases that can run.
//
// The reason is printed as "SKIPPED: <test case>: <reason>" (ctest keeps it
// in Testing/Temporary/LastTest.log; scripts/test.sh prints those lines).

#include <string>

namespace protocol {
namespace testing {

constexpr int kSkipExitCode = 77;

// Records that the running test case cannot run here, and why. The caller
// returns right after (SKIP_TEST does both). Checks made before it still count.
void DeclareSkip(const std::string& reason);

}  // namespace testing
}  // namespace protocol

#define SKIP_TEST(reason)                              \
  do {                                                 \
    ::protocol::testing::DeclareSkip(reason);          \
    return;                                            \
  } while (0)

#endif  // PROTOCOL_TESTS_SKIP_H_
