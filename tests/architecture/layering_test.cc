// The folder graph of src/ (docs/architecture.md): every #include "..." of a
// source file names a header of its own folder or of a folder it may include,
// each third-party library is included from its one home, and libtorch
// (ATen, c10, torch) only from the native rooms that compute with it. A new
// upward include fails here with the file, the line and the rule it breaks;
// the last cases plant violations in a scratch tree and see each rule fail.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "test_files.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;

// A file's folder ("layer"): the first of these prefixes its path (relative
// to src/) starts with. A room comes before the folder that holds it.
const std::vector<std::string> kLayers = {
    "runner/base",  "runner/plan", "runner/store", "runner/exec", "runner/analysis", "report",
    "backends/native/platform", "backends/native/model", "backends/native/quant", "backends/native/training",
    "backends/native/distributed", "backends/native/launch", "backends/native/case", "backends/native/estimate",
    "backends/native/check", "backends/native", "backends", "cli"};

const std::set<std::string> kRunnerLayers = {"runner/base", "runner/plan", "runner/store", "runner/exec"};

std::set<std::string> With(std::set<std::string> a, const std::set<std::string>& b) {
  a.insert(b.begin(), b.end());
  return a;
}

// What each folder may include besides itself.
const std::map<std::string, std::set<std::string>> kMayInclude = {
    {"runner/base", {}},
    {"runner/plan", {"runner/base"}},
    {"runner/store", {"runner/base", "runner/plan"}},
    {"runner/exec", {"runner/base", "runner/plan", "runner/store"}},
    {"runner/analysis", {"runner/base", "runner/plan", "runner/store"}},
    {"report", {"runner/base", "runner/plan", "runner/store", "runner/analysis"}},
    // The native rooms, bottom up: the libtorch adapter and machine facts; the
    // model; quantization; training; distributed training. Launching ranks
    // needs no libtorch and no model: it sits beside them, on the runner.
    {"backends/native/platform", {"runner/base"}},
    {"backends/native/model", {"runner/base", "runner/plan", "backends/native/platform"}},
    {"backends/native/quant", {"runner/base", "runner/plan", "backends/native/platform", "backends/native/model"}},
    {"backends/native/training", {"runner/base", "runner/plan", "backends/native/platform", "backends/native/model"}},
    {"backends/native/distributed",
     {"runner/base", "runner/plan", "backends/native/platform", "backends/native/model", "backends/native/quant",
      "backends/native/training"}},
    {"backends/native/launch", kRunnerLayers},
    // One case's steps, the same for one process and for a rank (one training loop).
    {"backends/native/case",
     With(kRunnerLayers, {"backends/native/platform", "backends/native/model", "backends/native/quant",
                          "backends/native/training", "backends/native/distributed", "backends/native/launch"})},
    // What a case will take, by formula: memory, traffic, time.
    {"backends/native/estimate", With(kRunnerLayers, {"backends/native/platform", "backends/native/model"})},
    // The plan rules of the native backends, and their notes.
    {"backends/native/check",
     With(kRunnerLayers, {"backends/native/platform", "backends/native/model", "backends/native/training",
                          "backends/native/distributed", "backends/native/launch", "backends/native/case",
                          "backends/native/estimate"})},
    {"backends/native",
     With(kRunnerLayers, {"backends/native/platform", "backends/native/model", "backends/native/quant",
                          "backends/native/training", "backends/native/distributed", "backends/native/launch",
                          "backends/native/case", "backends/native/estimate", "backends/native/check"})},
    {"backends", With(kRunnerLayers, {"backends/native", "backends/native/platform", "backends/native/quant"})},
    {"cli",
     With(kRunnerLayers, {"runner/analysis", "report", "backends", "backends/native", "backends/native/platform",
                          "backends/native/launch"})},
};

// Third-party headers (prefix of the <...> name) and the only files, by path
// under src/, that may include them.
const std::map<std::string, std::vector<std::string>> kLibraryHomes = {
    {"yaml-cpp/", {"runner/plan/yaml_tree.cc"}},
    {"sqlite3.h", {"runner/store/store.cc"}},
    {"kainjow/", {"report/render.cc"}},
    {"CLI/", {"cli/cli.cc"}},
    {"nlohmann/", {"runner/base/json.h"}},
    {"spdlog/", {"runner/base/log.h", "runner/base/log.cc"}},
    {"fmt/", {"runner/base/text.h"}},
    {"snappy", {"backends/native/training/decompress.cc"}},
    {"zstd", {"backends/native/training/decompress.cc"}},
    {"zlib.h", {"backends/native/training/decompress.cc"}},
    {"torch/csrc/distributed/", {"backends/native/platform/torch_compat.cc"}},
    {"c10/cuda/", {"backends/native/platform/torch_compat.cc"}},
    {"ATen/cuda/", {"backends/native/platform/torch_compat.cc"}},
    {"torch/csrc/api/include/torch/version.h", {"backends/native/platform/torch_compat.cc"}},
};

// libtorch's headers and the folders that may include them: the native rooms
// that hold tensors. Nothing of the runner, the report, the command line, the
// launch room or the backend registry includes libtorch.
const std::vector<std::string> kTorchPrefixes = {"ATen/", "c10/", "torch/"};
const std::set<std::string> kTorchLayers = {"backends/native/platform", "backends/native/model",
                                            "backends/native/quant",    "backends/native/training",
                                            "backends/native/distributed", "backends/native/case",
                                            "backends/native/estimate", "backends/native/check", "backends/native"};

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
    bool any = false;
    while (std::getline(in, text)) {
      ++line;
      if (text.rfind("#include ", 0) != 0) continue;
      const size_t open = text.find_first_of("\"<", 9);
      if (open == std::string::npos) continue;
      const char close = text[open] == '"' ? '"' : '>';
      const size_t end = text.find(close, open + 1);
      if (end == std::string::npos) continue;
      any = true;
      out.push_back({fs::relative(entry.path(), src).generic_string(), line, text.substr(open + 1, end - open - 1),
                     text[open] == '<'});
    }
    if (!any) out.push_back({fs::relative(entry.path(), src).generic_string(), 0, "", false});
  }
  return out;
}

std::string At(const Include& inc) { return inc.file + ":" + std::to_string(inc.line) + ": "; }

// Files under no folder of kLayers.
std::vector<std::string> Orphans(const fs::path& src) {
  std::set<std::string> orphans;
  for (const Include& inc : ScanIncludes(src))
    if (LayerOf(inc.file).empty()) orphans.insert(inc.file);
  return {orphans.begin(), orphans.end()};
}

// Project includes that go where kMayInclude does not allow.
std::vector<std::string> UpwardIncludes(const fs::path& src) {
  std::vector<std::string> violations;
  for (const Include& inc : ScanIncludes(src)) {
    if (inc.system || inc.target.empty()) continue;
    const std::string from = LayerOf(inc.file), to = LayerOf(inc.target);
    if (from.empty() || from == to) continue;
    if (to.empty())
      violations.push_back(At(inc) + "\"" + inc.target + "\" is not under a folder of the graph");
    else if (!kMayInclude.at(from).count(to))
      violations.push_back(At(inc) + from + " may not include " + to + " (\"" + inc.target + "\")");
  }
  return violations;
}

// Third-party includes outside their home, and libtorch outside its rooms.
std::vector<std::string> MisplacedLibraries(const fs::path& src) {
  std::vector<std::string> violations;
  for (const Include& inc : ScanIncludes(src)) {
    if (!inc.system) continue;
    for (const auto& [prefix, homes] : kLibraryHomes) {
      if (inc.target.rfind(prefix, 0) != 0) continue;
      bool home = false;
      for (const std::string& h : homes) home = home || inc.file == h;
      if (!home) violations.push_back(At(inc) + "<" + inc.target + "> outside its home");
    }
    for (const std::string& prefix : kTorchPrefixes)
      if (inc.target.rfind(prefix, 0) == 0 && !kTorchLayers.count(LayerOf(inc.file)))
        violations.push_back(At(inc) + "<" + inc.target + "> (libtorch) in " + LayerOf(inc.file));
  }
  return violations;
}

// Entry points: the files through which a folder is used from above (a
// backend's factory, the distributed launch, the rank worker, the report's
// entry, the command line and the programs' main files). Within its folder
// an entry header is included only by its own .cc and by the other entry
// points: types that several files share live in headers of their own
// (launch/dist_layout.h, report_options.h, formats/chart.h, exit_code.h),
// so no file below an entry point reaches back up to it.
const std::set<std::string> kEntryPoints = {
    "backends/native/dist_backend.h", "backends/native/fsdp_backend.h", "backends/native/share_backend.h",
    "backends/native/worker.h",       "report/report.h",                "report/verify.h",
    "cli/cli.h",                      "cli/main.cc",                    "cli/native_commands.cc"};

// Includes of an entry header from its own folder by a file that is neither
// its .cc nor an entry point.
std::vector<std::string> IncludesOfEntryPoints(const fs::path& src) {
  std::vector<std::string> violations;
  for (const Include& inc : ScanIncludes(src)) {
    if (inc.system || !kEntryPoints.count(inc.target) || kEntryPoints.count(inc.file)) continue;
    if (LayerOf(inc.file) != LayerOf(inc.target)) continue;  // from above: the folder graph's rule
    const fs::path own = fs::path(inc.target).replace_extension(".cc");
    if (inc.file == own.generic_string()) continue;
    violations.push_back(At(inc) + "includes \"" + inc.target + "\", an entry point of its own folder");
  }
  return violations;
}

const fs::path kSrc = fs::path(PROTOCOL_SOURCE_DIR) / "src";

TEST_CASE("layering: every source file belongs to a folder of the graph") {
  CHECK(Orphans(kSrc) == std::vector<std::string>{});
}

TEST_CASE("layering: no include reaches up the folder graph") {
  CHECK(UpwardIncludes(kSrc) == std::vector<std::string>{});
}

TEST_CASE("layering: no file includes an entry point of its own folder; shared types have headers of their own") {
  CHECK(IncludesOfEntryPoints(kSrc) == std::vector<std::string>{});
}

TEST_CASE("layering: each third-party library is included from its home, libtorch from the native rooms") {
  CHECK(MisplacedLibraries(kSrc) == std::vector<std::string>{});
}

TEST_CASE("layering: every folder of the graph has its rule, and the graph has no cycle") {
  for (const std::string& layer : kLayers) CHECK_MESSAGE(kMayInclude.count(layer), layer);
  // A folder may only include folders listed before it in kLayers' bottom-up
  // order, once rooms are read before their holder: no two folders include
  // each other, directly or around a loop.
  std::map<std::string, int> depth;
  std::function<int(const std::string&, int)> Depth = [&](const std::string& layer, int guard) -> int {
    REQUIRE(guard < 32);  // a cycle would recurse for ever
    if (depth.count(layer)) return depth[layer];
    int d = 0;
    for (const std::string& below : kMayInclude.at(layer)) d = std::max(d, Depth(below, guard + 1) + 1);
    return depth[layer] = d;
  };
  for (const std::string& layer : kLayers) Depth(layer, 0);
  CHECK(depth["cli"] > depth["backends"]);
  CHECK(depth["backends"] > depth["backends/native"]);
  CHECK(depth["backends/native"] > depth["backends/native/distributed"]);
}

// A folder a newcomer can take in at a glance: at most this many .cc files
// directly in any folder of src/ or tests/ (a larger one is split into rooms).
constexpr int kMostSourcesPerFolder = 15;

std::vector<std::string> CrowdedFolders(const fs::path& root) {
  std::vector<std::string> crowded;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_directory()) continue;
    int sources = 0;
    for (const auto& file : fs::directory_iterator(entry.path())) sources += file.path().extension() == ".cc";
    if (sources > kMostSourcesPerFolder)
      crowded.push_back(fs::relative(entry.path(), root).generic_string() + ": " + std::to_string(sources));
  }
  return crowded;
}

TEST_CASE("layering: no folder of src/ or tests/ holds more than 15 .cc files directly") {
  const fs::path root(PROTOCOL_SOURCE_DIR);
  CHECK(CrowdedFolders(root / "src") == std::vector<std::string>{});
  CHECK(CrowdedFolders(root / "tests") == std::vector<std::string>{});
}

// A scratch src/ with one violation of each rule beside files that are fine.
struct PlantedTree {
  testing::TempDir dir{"layering"};
  fs::path src = dir.path / "src";
  void Write(const std::string& file, const std::string& text) {
    fs::create_directories((src / file).parent_path());
    std::ofstream(src / file) << text;
  }
};

TEST_CASE("layering: the checks fail on a planted violation of each rule") {
  PlantedTree t;
  t.Write("runner/exec/runner.h", "#include \"runner/store/store.h\"\n");  // fine: exec may include store
  t.Write("runner/base/bad.cc", "#include <string>\n#include \"runner/exec/runner.h\"\n");
  t.Write("backends/native/model/bad.cc", "#include \"backends/native/distributed/fsdp_sharded.h\"\n");
  t.Write("backends/native/launch/bad.cc", "#include <ATen/ATen.h>\n");
  t.Write("report/bad.cc", "#include <fmt/format.h>\n#include <yaml-cpp/yaml.h>\n");
  t.Write("backends/native/platform/torch_compat.cc", "#include <c10/cuda/CUDAFunctions.h>\n");  // its home
  t.Write("elsewhere/orphan.cc", "int x;\n");
  t.Write("report/report.cc", "#include \"report/report.h\"\n");  // fine: its own .cc
  t.Write("report/tables/bad.cc", "#include \"report/report.h\"\n");
  for (int i = 0; i <= kMostSourcesPerFolder; ++i) t.Write("report/many/f" + std::to_string(i) + ".cc", "");

  CHECK(Orphans(t.src) == std::vector<std::string>{"elsewhere/orphan.cc"});
  CHECK(CrowdedFolders(t.src) == std::vector<std::string>{"report/many: 16"});
  std::vector<std::string> upward = UpwardIncludes(t.src);
  std::sort(upward.begin(), upward.end());
  CHECK(upward == std::vector<std::string>{
                      "backends/native/model/bad.cc:1: backends/native/model may not include "
                      "backends/native/distributed (\"backends/native/distributed/fsdp_sharded.h\")",
                      "runner/base/bad.cc:2: runner/base may not include runner/exec (\"runner/exec/runner.h\")"});
  CHECK(IncludesOfEntryPoints(t.src) ==
        std::vector<std::string>{
            "report/tables/bad.cc:1: includes \"report/report.h\", an entry point of its own folder"});
  std::vector<std::string> libraries = MisplacedLibraries(t.src);
  std::sort(libraries.begin(), libraries.end());
  CHECK(libraries == std::vector<std::string>{
                         "backends/native/launch/bad.cc:1: <ATen/ATen.h> (libtorch) in backends/native/launch",
                         "report/bad.cc:1: <fmt/format.h> outside its home",
                         "report/bad.cc:2: <yaml-cpp/yaml.h> outside its home"});
}

}  // namespace
}  // namespace protocol
