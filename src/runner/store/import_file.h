#ifndef PROTOCOL_RUNNER_STORE_IMPORT_FILE_H_
#define PROTOCOL_RUNNER_STORE_IMPORT_FILE_H_

// Published figures for auditors (`protocol import FILE`), in the YAML form of
// docs/import-format.md. Imported figures are stored as a run of kind "import",
// each figure a case row with one measurement marked kImported with the file's
// `source:`; reports build the same tables from them as from measured runs.

#include <optional>
#include <string>
#include <vector>

#include "runner/base/clock.h"
#include "runner/base/status.h"
#include "runner/plan/diagnostic.h"
#include "runner/plan/plan.h"
#include "runner/store/store.h"

namespace protocol {

struct ImportedFigure {
  SourceLocation where;
  std::string model;      // as in plans, e.g. "llama2-70b"
  std::string workload;   // "pretrain" | "finetune" | "inference"
  std::optional<Length> length;  // steps or epochs; absent for inference
  std::string backend;    // the system: "fsdp" | "share" | other
  int nodes = 1;
  std::string network;    // optional column label
  std::string variant;    // optional label, e.g. "multi-inference"
  std::string metric;     // "wall_minutes" | "wall_seconds" | "total_generation_seconds" | ...
  std::optional<double> value;  // absent when marker == "not-provided"
  std::string marker;     // "" | "extrapolated" | "not-provided"
};

struct ImportFile {
  std::string path;
  std::string text;
  std::string source;
  std::vector<ImportedFigure> figures;
};

struct ImportParseResult {
  std::optional<ImportFile> file;
  std::vector<Diagnostic> errors;  // all problems, located
  std::string source_text;
  bool ok() const { return errors.empty() && file.has_value(); }
};

ImportParseResult ParseImportFile(const std::string& path);
ImportParseResult ParseImportString(const std::string& text, const std::string& file_label);

// Stores the figures as one run of kind "import"; returns the run id.
// wall_minutes is stored as wall_seconds (value × 60) with method saying so.
Result<int64_t> StoreImport(Store& store, const ImportFile& file, Clock& clock);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_STORE_IMPORT_FILE_H_
