// The folder graph of src/ (docs/architecture.md): every #include "..." of a
// source file names a header of its own layer or of a layer below it, and
// each third-party library is included from one module only. A new upward
// include fails here with the file, the line and the rule it breaks.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace protocol {
namespace {
namespace fs = std::filesystem;

// A file's layer: the first of these folder prefixes its path (relative to
// src/) starts with.
const std::vector<std::string> kLayers = {"runner/base", "runner/plan", "runner/store", "runner/exec",
                                          "runner/analysis", "runner/cli", "report", "backends"};

// What each layer may include besides itself.
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"runner/base", {}},
    {"runner/plan", {"runner/base"}},
    {"runner/store", {"runner/base", "runner/plan"}},
    {"runner/exec", {"runner/base", "runner/plan", "runner/store"}},
    {"runner/analysis", {"runner/base", "runner/plan", "runner/store", "runner/exec"}},
    {"report", {"runner/base", "runner/plan", "runner/store", "runner/analysis"}},
    {"backends", {"runner/base", "runner/plan", "runner/store", "runner/exec"}},
    {"runner/cli",
     {"runner/base", "runner/plan", "runner/store", "runner/exec", "runner/analysis", "report", "backends"}},
};

// Third-party headers (prefix of the <...> name) and the only files, by path
// prefix under src/, that may include them.
const std::map<std::string, std::vector<std::string>> kLibraryHomes = {
    {"yaml-cpp/", {"runner/plan/yaml_tree.cc"}},
    {"sqlite3.h", {"runner/store/store.cc"}},
    {"kainjow/", {"report/render.cc"}},
    {"CLI/", {"runner/cli/cli.cc"}},
    {"nlohmann/", {"runner/base/json.h"}},
    {"spdlog/", {"runner/base/log.h", "runner/base/log.cc"}},
    {"torch/csrc/distributed/", {"backends/native/torch_compat.cc"}},
    {"c10/cuda/", {"backends/native/torch_compat.cc"}},
    {"ATen/cuda/", {"backends/native/torch_compat.cc"}},
};

std::string LayerOf(const std::string& path) {
  for (const std::string& layer : kLayers)
    if (path.rfind(layer + "/", 0) == 0) return layer;
  return "";
}

struct Include {
  std::string file;  // relative to src/
  int line = 0;
  std::string target;
  bool system = false;  // <...>
};

std::vector<Include> ScanIncludes(const fs::path& src) {
  std::vector<Include> out;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cc")) continue;
    std::ifstream in(entry.path());
    std::string text;
    int line = 0;
    while (std::getline(in, text)) {
      ++line;
      if (text.rfind("#include ", 0) != 0) continue;
      const size_t open = text.find_first_of("\"<", 9);
      if (open == std::string::npos) continue;
      const char close = text[open] == '"' ? '"' : '>';
      const size_t end = text.find(close, open + 1);
      if (end == std::string::npos) continue;
      out.push_back({fs::relative(entry.path(), src).generic_string(), line, text.substr(open + 1, end - open - 1),
                     text[open] == '<'});
    }
  }
  return out;
}

const fs::path kSrc = fs::path(PROTOCOL_SOURCE_DIR) / "src";

TEST_CASE("layering: every source file belongs to a layer") {
  std::vector<std::string> orphans;
  for (const Include& inc : ScanIncludes(kSrc))
    if (LayerOf(inc.file).empty()) orphans.push_back(inc.file);
  CHECK(orphans == std::vector<std::string>{});
}

TEST_CASE("layering: no include reaches up the folder graph") {
  std::vector<std::string> violations;
  for (const Include& inc : ScanIncludes(kSrc)) {
    if (inc.system) continue;
    const std::string from = LayerOf(inc.file), to = LayerOf(inc.target);
    if (from.empty() || from == to) continue;
    if (to.empty()) {
      violations.push_back(inc.file + ":" + std::to_string(inc.line) + ": \"" + inc.target +
                           "\" is not under a layer folder");
      continue;
    }
    if (!kMayInclude.at(from).count(to))
      violations.push_back(inc.file + ":" + std::to_string(inc.line) + ": " + from + " may not include " + to +
                           " (\"" + inc.target + "\")");
  }
  CHECK(violations == std::vector<std::string>{});
}

TEST_CASE("layering: each third-party library is included from one module") {
  std::vector<std::string> violations;
  for (const Include& inc : ScanIncludes(kSrc)) {
    if (!inc.system) continue;
    for (const auto& [prefix, homes] : kLibraryHomes) {
      if (inc.target.rfind(prefix, 0) != 0) continue;
      bool home = false;
      for (const std::string& h : homes) home = home || inc.file == h;
      if (!home) violations.push_back(inc.file + ":" + std::to_string(inc.line) + ": <" + inc.target + ">");
    }
  }
  CHECK(violations == std::vector<std::string>{});
}

TEST_CASE("layering: the rules see a violation") {
  // The checks above must be able to fail: an include from base into exec is refused.
  CHECK(LayerOf("runner/base/text.h") == "runner/base");
  CHECK(LayerOf("backends/native/model.cc") == "backends");
  CHECK_FALSE(kMayInclude.at("runner/base").count(LayerOf("runner/exec/runner.h")));
  CHECK(kMayInclude.at("runner/cli").count(LayerOf("backends/registry.h")));
}

}  // namespace
}  // namespace protocol
