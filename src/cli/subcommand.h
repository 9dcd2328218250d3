#ifndef PROTOCOL_CLI_SUBCOMMAND_H_
#define PROTOCOL_CLI_SUBCOMMAND_H_

// What every subcommand shares: its options (bound by CLI11 in cli.cc), how
// errors are printed and mapped to exit codes, the database, the output file.

#include <memory>
#include <string>
#include <vector>

#include "cli/exit_code.h"
#include "report/report.h"
#include "runner/base/status.h"
#include "runner/plan/coverage.h"  // kBaselineSystem, kCandidateSystem
#include "runner/store/store.h"

namespace protocol {

inline constexpr const char* kDefaultDb = "results/protocol.db";

// Options of every subcommand, bound by CLI11. One struct keeps the wiring flat.
struct Args {
  std::string db = kDefaultDb;
  std::vector<std::string> plans;  // run: one; validate: one or more
  std::vector<std::string> only;
  bool dry_run = false;
  bool no_calibrate = false;  // run: keep the assumed CPU figures where this host has no calibration
  std::string resume;  // run: a run spec (ID | latest | latest:PLAN)
  std::vector<std::string> set;
  std::string logs_dir = "results/logs";
  std::string run_id;
  bool json = false;
  std::vector<std::string> runs;  // report, export: run specs
  std::string model;
  std::string format;
  std::string template_path;
  std::string out;
  std::string baseline_system = kBaselineSystem;
  std::string candidate_system = kCandidateSystem;
  std::vector<std::string> further_baselines = {kFurtherBaselineSystem};  // report: "none" = no further baseline
  std::string import_file;
  std::string junit;                   // run, compare: JUnit XML here
  bool check = false;                  // run: check reference bands
  std::string baseline, candidate;     // compare
  std::string threshold = "5%";        // compare
  std::vector<std::string> metrics;    // compare
  std::string verify;                  // report: verify this file
  int64_t history_through = 0;         // report: history charts up to this run id (0: every run)
  std::string worker_case;  // worker: the case file a distributed backend wrote
  double calibrate_seconds = 3;  // calibrate: seconds for each of matmul and memory
};

// "protocol: TEXT" on stderr.
void PrintError(const std::string& text);
// Maps a Status to an exit code: what the user named wrongly (a bad flag or
// file, an unknown run) is bad input (2); a database or file that cannot be
// read or written (unreadable, not a database, locked beyond the busy
// timeout, disk full) and our own bugs are internal or I/O errors (3).
int ExitFor(const Status& status);
// Prints the status and returns its exit code.
int Fail(const Status& status);
// Whether a command may create the database: only `run` and `import` write
// results; every other command reads, and a mistyped --db must not leave an
// empty database behind as if nothing had been stored.
enum class DbAccess { kCreate, kMustExist };
// The database at `path`, or nullptr after printing why (and setting
// *exit_code). With kMustExist a file that does not exist is refused with
// exit 2, the message naming the path (":memory:" always opens).
std::unique_ptr<Store> OpenOrReport(const std::string& path, int* exit_code,
                                    DbAccess access = DbAccess::kMustExist);
// Writes `text` to `path` (creating parent directories), or stdout when empty or "-".
int WriteOutput(const std::string& text, const std::string& path);

// What a file extension means as a format, e.g. {".csv", "csv"}.
struct Extension {
  const char* suffix;
  const char* format;
};
// The format to write: --format when given, else the one the --out file's
// extension names, else `fallback`. A --format that contradicts a known
// extension of the file is an error naming both (kInvalidArgument).
Result<std::string> PickFormat(const std::string& flag, const std::string& file,
                               const std::vector<Extension>& extensions, const std::string& fallback);

}  // namespace protocol

#endif  // PROTOCOL_CLI_SUBCOMMAND_H_
