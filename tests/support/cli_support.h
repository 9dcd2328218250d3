#ifndef PROTOCOL_TESTS_CLI_SUPPORT_H_
#define PROTOCOL_TESTS_CLI_SUPPORT_H_

// Running the real `protocol` binary from tests (cli_*_test.cc): a fresh
// temporary directory, files written into it (test_files.h), and one call of the program
// (or of a shell command line) with its stdout, stderr and exit code captured.

#include <doctest/doctest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runner/store/store.h"
#include "test_files.h"

namespace protocol::testing {

struct Output {
  int exit_code = -1;
  std::string out;  // stdout
  std::string err;  // stderr
};

// Runs the /bin/sh command line `command` in `cwd`, capturing stdout, stderr
// and the exit code (128 + N when killed by signal N).
inline Output Shell(const std::string& command, const std::filesystem::path& cwd) {
  std::string cmd = "cd " + ShellQuote(cwd.string()) + " && " + command;
  static std::atomic<int> calls{0};
  int n = calls++;
  std::filesystem::path out = std::filesystem::temp_directory_path() /
                              ("protocol-cli-" + std::to_string(getpid()) + "-" + std::to_string(n) + ".out");
  std::filesystem::path err = out;
  err.replace_extension(".err");
  cmd += " >" + ShellQuote(out.string()) + " 2>" + ShellQuote(err.string()) + " </dev/null";
  int status = std::system(cmd.c_str());
  Output o;
  o.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  o.out = ReadAll(out);
  o.err = ReadAll(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return o;
}

// Runs `protocol ARGS...` in `cwd`, capturing stdout, stderr and the exit code;
// `env` is a prefix of VAR=value assignments ("" for none).
inline Output Protocol(const std::vector<std::string>& args, const std::filesystem::path& cwd,
                       const std::string& env = "") {
  std::string cmd = env + " " + ShellQuote(PROTOCOL_BINARY);
  for (const auto& a : args) cmd += " " + ShellQuote(a);
  return Shell(cmd, cwd);
}

// A plan of one quick command case (`true`): a run of it takes well under a second.
inline constexpr const char* kQuickPlan = R"yaml(protocol: 1
name: quick
title: "one quick case"
models:
  m: {preset: tiny}
defaults: {model: m, backend: command, system: fsdp}
stages:
  - name: s
    cases:
      - {id: c, workload: inference, nodes: 1, inference: {prompt: hi, max_new_tokens: [1]}, command: {argv: ["true"]}}
)yaml";

inline std::vector<CaseRecord> CasesOf(const std::filesystem::path& db, int64_t run) {
  auto store = OpenStore(db.string());
  REQUIRE(store.ok());
  auto cases = (*store)->CasesOfRun(run);
  REQUIRE(cases.ok());
  return cases.value();
}

}  // namespace protocol::testing

#endif  // PROTOCOL_TESTS_CLI_SUPPORT_H_
