// docs/cli.md is the command reference generated from the command table that
// `--help` is built from (`build/protocol --help-markdown > docs/cli.md`): it
// must be exactly what the program prints, so a new flag or a changed help
// text cannot leave the page behind.

#include <doctest/doctest.h>

#include <string>

#include "cli_support.h"

namespace protocol {
namespace {

TEST_CASE("cli reference: docs/cli.md is what `protocol --help-markdown` generates") {
  testing::TempDir dir;
  testing::Output generated = testing::Protocol({"--help-markdown"}, dir.path);
  REQUIRE(generated.exit_code == 0);
  CHECK(generated.err == "");
  const std::string page = testing::ReadAll(std::string(PROTOCOL_SOURCE_DIR) + "/docs/cli.md");
  INFO("regenerate it: build/protocol --help-markdown > docs/cli.md");
  CHECK(page == generated.out);
}

TEST_CASE("cli reference: every subcommand and flag is in it, hidden ones not") {
  testing::TempDir dir;
  const std::string md = testing::Protocol({"--help-markdown"}, dir.path).out;
  for (const char* heading : {"## `protocol run PLAN`", "## `protocol validate PLANS...`", "## `protocol list`",
                              "## `protocol show RUN`", "## `protocol report`", "## `protocol import FILE`",
                              "## `protocol export`", "## `protocol compare BASELINE CANDIDATE`",
                              "## `protocol backends`"})
    CHECK_MESSAGE(md.find(heading) != std::string::npos, heading);
  for (const char* flag : {"`--log-level TEXT:{quiet,info,debug}`", "`--json`", "`--model TEXT`",
                           "`--baseline-system TEXT`", "`--candidate-system TEXT`", "`--check`"})
    CHECK_MESSAGE(md.find(flag) != std::string::npos, flag);
  CHECK(md.find("worker") == std::string::npos);
  CHECK(md.find("--help-markdown`") == std::string::npos);
}

}  // namespace
}  // namespace protocol
