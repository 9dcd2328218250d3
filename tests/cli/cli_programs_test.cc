// The two programs (src/cli/native_commands.h): `protocol` answers the
// subcommands that need no libtorch itself and never loads libtorch;
// run, validate, backends, worker and --version are `protocol-native`'s, with
// the same arguments, so the user sees one program.
#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "cli_support.h"
#include "runner/store/store.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using testing::Output;
using testing::Protocol;
using testing::ShellQuote;
using testing::TempDir;

// The shared libraries the dynamic loader maps for `program` (ldd's output).
std::string LoadedLibraries(const std::string& program) {
  std::string text;
  FILE* pipe = popen(("ldd " + ShellQuote(program) + " 2>&1").c_str(), "r");
  REQUIRE(pipe != nullptr);
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) text.append(buffer, n);
  pclose(pipe);
  REQUIRE(text.find("libc.so") != std::string::npos);  // ldd worked
  return text;
}

TEST_CASE("programs: protocol loads no libtorch; protocol-native does") {
  CHECK(LoadedLibraries(PROTOCOL_BINARY).find("libtorch") == std::string::npos);
  CHECK(LoadedLibraries(PROTOCOL_BINARY).find("libc10") == std::string::npos);
  CHECK(LoadedLibraries(PROTOCOL_NATIVE_BINARY).find("libtorch") != std::string::npos);
}

TEST_CASE("programs: the subcommands that need libtorch answer through protocol the same as protocol-native") {
  TempDir dir;
  Output version = Protocol({"--version"}, dir.path);
  CHECK(version.exit_code == 0);
  CHECK(version.out.find("libtorch") != std::string::npos);
  Output backends = Protocol({"backends"}, dir.path);
  CHECK(backends.exit_code == 0);
  CHECK(backends.out.find("fsdp") != std::string::npos);
  CHECK(backends.out.find("share") != std::string::npos);
  Output bad_plan = Protocol({"validate", "missing.yaml"}, dir.path);
  CHECK(bad_plan.exit_code == 2);
  // protocol-native itself, called directly, says the same.
  const std::string direct = "cd " + ShellQuote(dir.path.string()) + " && " + ShellQuote(PROTOCOL_NATIVE_BINARY) +
                             " --version > native.out";
  REQUIRE(std::system(direct.c_str()) == 0);
  CHECK(testing::ReadAll(dir.path / "native.out") == version.out);
}

TEST_CASE("programs: protocol without protocol-native beside it says which program is missing") {
  TempDir dir;
  fs::copy_file(PROTOCOL_BINARY, dir.path / "protocol");
  fs::permissions(dir.path / "protocol", fs::perms::owner_all);
  const std::string cmd = "cd " + ShellQuote(dir.path.string()) + " && ./protocol backends > out.txt 2> err.txt";
  const int status = std::system(cmd.c_str());
  CHECK(WEXITSTATUS(status) == 3);
  const std::string err = testing::ReadAll(dir.path / "err.txt");
  CHECK(err.find("protocol-native") != std::string::npos);
  CHECK(err.find("libtorch") != std::string::npos);
  // What needs no libtorch still works there.
  REQUIRE(OpenStore((dir.path / "r.db").string()).ok());
  const std::string list = "cd " + ShellQuote(dir.path.string()) + " && ./protocol list --db r.db > list.txt 2>&1";
  CHECK(std::system(list.c_str()) == 0);
}

}  // namespace
}  // namespace protocol
