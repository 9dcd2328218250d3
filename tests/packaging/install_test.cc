// `cmake --install`: the two programs in PREFIX/bin, the templates, plans,
// docs and data in PREFIX/share/protocol, and an installed program that finds
// its templates and its sibling from its own path, from any directory.

#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_support.h"

namespace fs = std::filesystem;

namespace protocol {
namespace {

TEST_CASE("install: the installed programs run from any directory and use the installed templates") {
  testing::TempDir dir;
  const fs::path build = fs::path(PROTOCOL_BINARY).parent_path();
  const fs::path prefix = dir.path / "prefix";
  const testing::Output install = testing::Shell(
      "cmake --install " + testing::ShellQuote(build.string()) + " --prefix " + testing::ShellQuote(prefix.string()),
      dir.path);
  INFO(install.out, install.err);
  REQUIRE(install.exit_code == 0);
  for (const char* file : {"bin/protocol", "bin/protocol-native", "share/protocol/templates/report.md.mustache",
                           "share/protocol/templates/report.html.mustache", "share/protocol/plans/quickstart.yaml",
                           "share/protocol/plans/llama70b.yaml", "share/protocol/data/quickstart/corpus.txt",
                           "share/protocol/docs/README.md"}) {
    CAPTURE(file);
    CHECK(fs::exists(prefix / file));
  }
  // The installed copy is the one read: a marker in it shows up in the report.
  {
    std::ofstream(prefix / "share/protocol/templates/report.md.mustache", std::ios::app) << "\ninstalled-template-marker\n";
  }
  const fs::path elsewhere = dir.path / "elsewhere";
  fs::create_directories(elsewhere);
  const std::string installed = testing::ShellQuote((prefix / "bin/protocol").string());
  const std::string env = "env -u PROTOCOL_TEMPLATES ";
  const testing::Output version = testing::Shell(env + installed + " --version", elsewhere);
  CHECK(version.exit_code == 0);
  CHECK(version.out.find("libtorch") != std::string::npos);  // answered by the installed protocol-native
  // A copy of the report fixture: opening a database migrates it to this program's schema.
  fs::copy_file(fs::path(PROTOCOL_SOURCE_DIR) / "tests/data/report/quickstart.db", elsewhere / "q.db");
  const testing::Output report = testing::Shell(env + installed + " report --db q.db --out report.md", elsewhere);
  INFO(report.err);
  REQUIRE(report.exit_code == 0);
  CHECK(testing::ReadAll(elsewhere / "report.md").find("installed-template-marker") != std::string::npos);
  const testing::Output validate = testing::Shell(
      env + installed + " validate " + testing::ShellQuote((prefix / "share/protocol/plans/quickstart.yaml").string()),
      elsewhere);
  INFO(validate.err);
  CHECK(validate.exit_code == 0);
}

}  // namespace
}  // namespace protocol
