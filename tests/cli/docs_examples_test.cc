// Every example in README.md and docs/*.md runs against the built program
// (docs/README.md, "Examples are tested"). Each fenced block is taken by its
// info string, its first word the language and the others flags:
//
//   ```sh       every line that starts with `protocol` or `build/protocol`
//               runs (through /bin/sh, so globs expand) in a scratch
//               directory that has the repository's plans/, data/,
//               examples/, templates/, scripts/ and bench/, and a database
//               results/protocol.db holding two runs of plan quickstart
//               (tests/data/compare/quickstart.json); it must exit 0. Other
//               lines (scripts, sqlite3, comments) are not run.
//   ```sh slow  as sh, but `protocol run PLAN ...` is checked with
//               `protocol validate PLAN` and the line's --set values instead
//               of running (the quick start and the rigs' plans take minutes
//               to hours).
//   ```yaml     a plan (a map with `protocol:`) must pass `protocol
//               validate`; an import file (a map with `source:` and
//               `results:`) must import; anything else is a fragment of a
//               plan and must be YAML that parses.
//   ```yaml error   a plan that is wrong on purpose: validate must exit 2 and
//               print each text the block states in a `# error: TEXT` line.
//   ```output protocol ARGS...   what a command prints, quoted: the command
//               (the rest of the info string) runs as an sh line does, and
//               each line of the block must be a line of its output (stdout
//               and stderr); a line ending in "..." must begin one. Figures
//               quoted this way cannot drift from the program.
//
// Other languages are not run. A failure names FILE:LINE of the example.

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <string>
#include <vector>

#include "cli_support.h"
#include "regression_fixtures.h"
#include "runner/base/text.h"
#include "runner/plan/yaml_tree.h"
#include "runner/store/store.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;
using testing::Output;

struct FencedBlock {
  int line = 0;  // the opening fence's, 1-based
  std::string language;
  std::vector<std::string> flags;
  std::vector<std::string> lines;

  bool Has(const std::string& flag) const { return std::find(flags.begin(), flags.end(), flag) != flags.end(); }
};

// The fenced (```) blocks of a Markdown text; a fence may be indented (in a list).
std::vector<FencedBlock> FencedBlocks(const std::string& markdown) {
  std::vector<FencedBlock> blocks;
  const std::vector<std::string> lines = Split(markdown, '\n');
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string fence = Trim(lines[i]);
    if (!StartsWith(fence, "```")) continue;
    FencedBlock block;
    block.line = static_cast<int>(i) + 1;
    std::vector<std::string> info;
    for (const std::string& w : Split(fence.substr(3), ' '))
      if (!w.empty()) info.push_back(w);
    if (!info.empty()) {
      block.language = info.front();
      block.flags.assign(info.begin() + 1, info.end());
    }
    for (++i; i < lines.size() && Trim(lines[i]) != "```"; ++i) block.lines.push_back(lines[i]);
    blocks.push_back(block);
  }
  return blocks;
}

// A shell line's words, quotes removed ('...' and "..." only; no escapes),
// up to an unquoted `#` that starts a word.
std::vector<std::string> ShellWords(const std::string& line) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false;
  char quote = 0;
  for (char c : line) {
    if (quote) {
      if (c == quote) quote = 0;
      else word += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      in_word = true;
    } else if (c == ' ' || c == '\t') {
      if (in_word) words.push_back(word);
      word.clear();
      in_word = false;
    } else if (c == '#' && !in_word) {
      break;
    } else {
      word += c;
      in_word = true;
    }
  }
  if (in_word) words.push_back(word);
  return words;
}

// `protocol run PLAN [flags]` of a slow block as `protocol validate PLAN
// [--set ...]`; any other command as written. `words` starts at "protocol".
std::string CommandLine(const std::vector<std::string>& words, bool slow) {
  std::vector<std::string> out = {"protocol"};
  const bool run = words.size() > 1 && words[1] == "run";
  if (slow && run) {
    out.push_back("validate");
    const std::vector<std::string> with_value = {"--only", "--resume", "--logs", "--junit", "--db"};
    for (size_t i = 2; i < words.size(); ++i) {
      const std::string& w = words[i];
      if (w == "--set" && i + 1 < words.size()) {
        out.push_back(w);
        out.push_back(words[++i]);
      } else if (std::find(with_value.begin(), with_value.end(), w) != with_value.end()) {
        ++i;
      } else if (!StartsWith(w, "-")) {
        out.push_back(w);
      }
    }
  } else {
    out.insert(out.end(), words.begin() + 1, words.end());
  }
  std::string line;
  for (const std::string& w : out) {
    // Quote only what needs it, so that globs (plans/*.yaml) still expand.
    const bool plain = w.find_first_of(" '\"$;&|<>()[]{}`\\") == std::string::npos;
    line += (line.empty() ? "" : " ") + (plain || w == "protocol" ? w : testing::ShellQuote(w));
  }
  return line;
}

// A scratch directory in which the docs' relative paths (plans/..., results/...) work.
struct Scratch {
  testing::TempDir dir{"docs"};

  Scratch() {
    const fs::path source = PROTOCOL_SOURCE_DIR;
    for (const char* name : {"plans", "data", "examples", "templates", "scripts", "bench"})
      if (fs::exists(source / name)) fs::create_directory_symlink(source / name, dir.path / name);
    fs::create_directory_symlink(fs::path(PROTOCOL_BINARY).parent_path(), dir.path / "build");
    fs::create_directories(dir.path / "results");
    auto store = OpenStore((dir.path / "results/protocol.db").string());
    REQUIRE(store.ok());
    testing::LoadRunsFixture(**store, "quickstart.json");
  }

  // `line` through /bin/sh here, with `protocol` on the PATH.
  Output Run(const std::string& line) const {
    const std::string bin = fs::path(PROTOCOL_BINARY).parent_path().string();
    return testing::Shell("PATH=" + testing::ShellQuote(bin) + ":\"$PATH\"; export PATH; " + line, dir.path);
  }
};

std::string Describe(const Output& o) {
  return fmt::format("exited {}; stdout: {}; stderr: {}", o.exit_code, o.out.substr(0, 2000), o.err.substr(0, 2000));
}

void CheckShell(const std::string& file, const FencedBlock& block, const Scratch& scratch,
                std::vector<std::string>* failures) {
  for (size_t k = 0; k < block.lines.size(); ++k) {
    std::vector<std::string> words = ShellWords(Trim(block.lines[k]));
    if (words.empty() || (words[0] != "protocol" && words[0] != "build/protocol")) continue;
    words[0] = "protocol";
    const std::string line = CommandLine(words, block.Has("slow"));
    Output o = scratch.Run(line);
    if (o.exit_code != 0)
      failures->push_back(fmt::format("{}:{}: `{}` {}", file, block.line + 1 + static_cast<int>(k), line, Describe(o)));
  }
}

void CheckYaml(const std::string& file, const FencedBlock& block, const Scratch& scratch,
               std::vector<std::string>* failures) {
  const std::string where = fmt::format("{}:{}", file, block.line);
  const std::string text = Join(block.lines, "\n") + "\n";
  YamlParse parse = ParseYaml(text, where);
  if (!parse.ok) {
    failures->push_back(fmt::format("{}: not YAML: {}", where, parse.error.ToString()));
    return;
  }
  const YamlNode& root = parse.root;
  const fs::path example = scratch.dir.path / "examples-of-docs" / fmt::format("line{}.yaml", block.line);
  if (root.Find("protocol")) {
    testing::WriteFile(example, text);
    Output o = scratch.Run("protocol validate " + testing::ShellQuote(example.string()));
    if (!block.Has("error")) {
      if (o.exit_code != 0) failures->push_back(fmt::format("{}: the plan does not validate: {}", where, Describe(o)));
      return;
    }
    std::vector<std::string> stated;
    for (const std::string& l : block.lines)
      if (size_t at = l.find("# error: "); at != std::string::npos) stated.push_back(Trim(l.substr(at + 9)));
    if (stated.empty()) failures->push_back(where + ": an `error` example states no `# error: TEXT`");
    if (o.exit_code != 2) failures->push_back(fmt::format("{}: an error example, but validate {}", where, Describe(o)));
    // The messages, without the source lines validate echoes under them (which hold the `# error:` text).
    std::string messages;
    for (const std::string& l : Split(o.err, '\n'))
      if (StartsWith(l, example.string() + ":") || StartsWith(l, "protocol:")) messages += l + "\n";
    for (const std::string& s : stated)
      if (messages.find(s) == std::string::npos)
        failures->push_back(fmt::format("{}: validate does not say '{}': {}", where, s, Describe(o)));
  } else if (root.Find("source") && root.Find("results")) {
    testing::WriteFile(example, text);
    Output o = scratch.Run("protocol import " + testing::ShellQuote(example.string()) + " --db results/imports.db");
    if (o.exit_code != 0) failures->push_back(fmt::format("{}: the import file does not import: {}", where, Describe(o)));
  }
}

void CheckOutput(const std::string& file, const FencedBlock& block, const Scratch& scratch,
                 std::vector<std::string>* failures) {
  std::vector<std::string> words = block.flags;  // the info string's words after "output", quotes kept
  words = ShellWords(Join(words, " "));
  if (words.empty() || words[0] != "protocol") {
    failures->push_back(fmt::format("{}:{}: an output block names no `protocol ...` command", file, block.line));
    return;
  }
  const std::string line = CommandLine(words, false);
  Output o = scratch.Run(line);
  const std::vector<std::string> printed = Split(o.out + o.err, '\n');
  for (size_t k = 0; k < block.lines.size(); ++k) {
    const std::string& quoted = block.lines[k];
    if (Trim(quoted).empty()) continue;
    const bool prefix = quoted.size() > 3 && quoted.compare(quoted.size() - 3, 3, "...") == 0;
    const std::string want = prefix ? quoted.substr(0, quoted.size() - 3) : quoted;
    const bool found = std::any_of(printed.begin(), printed.end(), [&](const std::string& p) {
      return prefix ? StartsWith(p, want) : p == want;
    });
    if (!found)
      failures->push_back(fmt::format("{}:{}: `{}` does not print {}'{}'", file, block.line + 1 + static_cast<int>(k),
                                      line, prefix ? "a line beginning " : "", want));
  }
}

// Runs every example of one Markdown document in a scratch directory of its
// own; returns one line per failed example, located FILE:LINE.
std::vector<std::string> CheckExamples(const std::string& file, const std::string& markdown) {
  Scratch scratch;
  std::vector<std::string> failures;
  for (const FencedBlock& block : FencedBlocks(markdown)) {
    if (block.language == "sh") CheckShell(file, block, scratch, &failures);
    if (block.language == "yaml") CheckYaml(file, block, scratch, &failures);
    if (block.language == "output") CheckOutput(file, block, scratch, &failures);
  }
  return failures;
}

// README.md and every docs/*.md, sorted.
std::vector<fs::path> DocPages() {
  const fs::path source = PROTOCOL_SOURCE_DIR;
  std::vector<fs::path> pages = {source / "README.md"};
  for (const auto& entry : fs::directory_iterator(source / "docs"))
    if (entry.path().extension() == ".md") pages.push_back(entry.path());
  std::sort(pages.begin(), pages.end());
  return pages;
}

TEST_CASE("docs examples: every sh and yaml example of README.md and docs/*.md runs") {
  const fs::path source = PROTOCOL_SOURCE_DIR;
  for (const fs::path& page : DocPages()) {
    const std::string file = fs::relative(page, source).string();
    std::vector<std::string> failures = CheckExamples(file, testing::ReadAll(page));
    INFO(Join(failures, "\n"));
    CHECK_MESSAGE(failures.empty(), file);
  }
}

TEST_CASE("docs examples: every test a page names exists") {
  // A word ending in `_test` (or `_test.cc`) names a test file, and ctest's test of the same name.
  const fs::path source = PROTOCOL_SOURCE_DIR;
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(source / "tests"))
    if (entry.path().extension() == ".cc") files.push_back(entry.path().stem().string());
  for (const fs::path& page : DocPages()) {
    const std::string text = testing::ReadAll(page);
    for (size_t at = text.find("_test"); at != std::string::npos; at = text.find("_test", at + 1)) {
      size_t begin = at;
      while (begin > 0 && (std::isalnum(static_cast<unsigned char>(text[begin - 1])) || text[begin - 1] == '_')) --begin;
      const size_t end = at + 5;
      if (end < text.size() && (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_')) continue;
      const std::string name = text.substr(begin, end - begin);
      CHECK_MESSAGE(std::find(files.begin(), files.end(), name) != files.end(),
                    fs::relative(page, source).string() << " names " << name << ", which is no test file");
    }
  }
}

TEST_CASE("docs: the glossary defines the terms of the reports and plans, in alphabetical order") {
  const std::string glossary = testing::ReadAll(std::string(PROTOCOL_SOURCE_DIR) + "/docs/glossary.md");
  std::vector<std::string> terms;  // each entry's first bold word, lower-cased
  for (const std::string& line : Split(glossary, '\n')) {
    if (!StartsWith(line, "**")) continue;
    std::string term = line.substr(2, line.find("**", 2) - 2);
    for (char& c : term) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    terms.push_back(term);
  }
  CHECK(std::is_sorted(terms.begin(), terms.end()));
  for (const char* term : {"share protocol", "cell", "rig", "tgs", "mfu", "prefix", "abba", "diloco", "case", "stage",
                           "system", "baseline", "further baseline", "provenance", "marker", "ratio", "topology",
                           "reference band", "held-out loss", "contention", "verdict", "workload", "variant"})
    CHECK_MESSAGE(std::find(terms.begin(), terms.end(), term) != terms.end(), term);
}

TEST_CASE("docs examples: a broken example fails, located at its line") {
  const std::string doc =
      "# A page\n"                                              // 1
      "```sh\n"                                                 // 2
      "protocol list                  # the seeded database\n"  // 3
      "protocol list --db results/typo.db\n"                    // 4
      "sqlite3 results/protocol.db .tables   # not run\n"       // 5
      "```\n"                                                   // 6
      "```sh slow\n"                                            // 7
      "protocol run plans/quickstart.yaml --check --set defaults.training.batch_size=4\n"  // 8
      "protocol run plans/nosuch.yaml\n"                        // 9
      "```\n"                                                   // 10
      "```yaml\n"                                               // 11
      "protocol: 1\n"
      "name: broken\n"
      "stages: []\n"
      "```\n"                                                   // 15
      "```yaml error\n"                                         // 16
      "protocol: 1\n"
      "name: wrong-on-purpose\n"
      "stages: []   # error: 'stages' is empty (a plan runs at least one stage)\n"
      "```\n"                                                   // 20
      "```yaml error\n"                                         // 21
      "protocol: 1\n"
      "name: stated-wrongly\n"
      "stages: []   # error: a message validate never prints\n"
      "```\n"                                                   // 25
      "```yaml\n"                                               // 26
      "defaults: {timeout: [unclosed\n"
      "```\n"                                                   // 28
      "```output protocol validate plans/native-tiny.yaml\n"    // 29
      "plans/native-tiny.yaml: ok (1 stage, 3 cases)\n"         // 30
      "  n.1.1: expected peak memory per rank process...\n"     // 31
      "  n.1.1: expected peak memory per GPU...\n"              // 32
      "```\n";
  std::vector<std::string> failures = CheckExamples("page.md", doc);
  INFO(Join(failures, "\n"));
  REQUIRE(failures.size() == 6);
  CHECK(StartsWith(failures[0], "page.md:4: `protocol list --db results/typo.db` exited 2; "));
  CHECK(failures[0].find("no database at results/typo.db") != std::string::npos);
  CHECK(StartsWith(failures[1], "page.md:9: `protocol validate plans/nosuch.yaml` exited 2; "));
  CHECK(StartsWith(failures[2], "page.md:11: the plan does not validate: exited 2; "));
  CHECK(StartsWith(failures[3], "page.md:21: validate does not say 'a message validate never prints'"));
  CHECK(StartsWith(failures[4], "page.md:26: not YAML: "));
  CHECK(failures[5] == "page.md:32: `protocol validate plans/native-tiny.yaml` does not print a line beginning "
                       "'  n.1.1: expected peak memory per GPU'");
}

TEST_CASE("docs examples: a shell line's words, and a slow run checked by validate") {
  CHECK((ShellWords("protocol run 'a b' \"c\" --set x=1   # comment") ==
         std::vector<std::string>{"protocol", "run", "a b", "c", "--set", "x=1"}));
  CHECK(CommandLine(ShellWords("protocol run plans/q.yaml --only 1,2 --resume 7 --check --set 'a[b].c=1' "
                               "--junit r.xml --dry-run"),
                    true) == "protocol validate plans/q.yaml --set 'a[b].c=1'");
  CHECK(CommandLine(ShellWords("protocol validate plans/*.yaml"), false) == "protocol validate plans/*.yaml");
}

}  // namespace
}  // namespace protocol
