#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>

#include "runner/plan/yaml_tree.h"

using namespace protocol;

namespace {

std::string ErrorOf(const std::string& text) {
  YamlParse p = ParseYaml(text, "x.yaml");
  return p.ok ? std::string("(ok)") : p.error.ToString();
}

}  // namespace

TEST_CASE("ParseYaml keeps 1-based locations, file order and quoting") {
  YamlParse p = ParseYaml("name: llama\nsteps: 1000\nlist:\n  - a\n  - 'b'\nempty:\nmap: {k: \"v\"}\n",
                          "x.yaml");
  REQUIRE(p.ok);
  const YamlNode& root = p.root;
  REQUIRE(root.kind == YamlNode::Kind::kMap);
  REQUIRE(root.entries.size() == 5);
  CHECK(root.entries[0].first.scalar == "name");
  CHECK(root.entries[0].first.line == 1);
  CHECK(root.entries[0].first.column == 1);
  CHECK(root.entries[0].second.scalar == "llama");
  CHECK(root.entries[0].second.column == 7);
  CHECK(root.entries[1].first.scalar == "steps");
  const YamlNode* steps = root.Find("steps");
  REQUIRE(steps != nullptr);
  CHECK(steps->line == 2);
  CHECK(steps->column == 8);
  CHECK_FALSE(steps->quoted);
  const YamlNode* list = root.Find("list");
  REQUIRE(list != nullptr);
  CHECK(list->kind == YamlNode::Kind::kSequence);
  REQUIRE(list->items.size() == 2);
  CHECK(list->items[0].scalar == "a");
  CHECK(list->items[0].line == 4);
  CHECK(list->items[0].column == 5);
  CHECK(list->items[1].scalar == "b");
  CHECK(list->items[1].quoted);
  CHECK(root.Find("empty")->kind == YamlNode::Kind::kNull);
  CHECK(root.Find("empty")->line == 6);
  const YamlNode* map = root.Find("map");
  REQUIRE(map->kind == YamlNode::Kind::kMap);
  CHECK(map->Find("k")->scalar == "v");
  CHECK(map->Find("k")->quoted);
  CHECK(map->Find("k")->line == 7);
  CHECK(map->Find("k")->column == 10);
  CHECK(root.Find("missing") == nullptr);
  CHECK(std::string(map->KindName()) == "map");
  CHECK(std::string(list->KindName()) == "sequence");
}

TEST_CASE("ParseYaml reports empty and comment-only files") {
  CHECK(ErrorOf("") == "x.yaml: file is empty");
  CHECK(ErrorOf("   \n\n\t\n") == "x.yaml: file is empty");
  CHECK(ErrorOf("# just a comment\n  # another\n") == "x.yaml: file is empty");
}

TEST_CASE("ParseYaml reports binary data with its byte offset") {
  CHECK(ErrorOf(std::string("a: 1\nb: \0\n", 10)) == "x.yaml: file is not text (binary data at byte 8)");
  CHECK(ErrorOf("a: \xff\xfe\n") == "x.yaml: file is not text (binary data at byte 3)");
  // A truncated multi-byte sequence at the very end is not text either.
  CHECK(ErrorOf("a: \xc3") == "x.yaml: file is not text (binary data at byte 3)");
  // Valid UTF-8 is text.
  YamlParse ok = ParseYaml("title: \"Effizienz \xc3\xa4\xe2\x82\xac\"\n", "x.yaml");
  REQUIRE(ok.ok);
  CHECK(ok.root.Find("title")->scalar == "Effizienz \xc3\xa4\xe2\x82\xac");
}

TEST_CASE("ParseYaml reports duplicate keys at the second one") {
  CHECK(ErrorOf("a: 1\nsteps: 2\nb:\n  c: 1\nsteps: 3\n") ==
        "x.yaml:5:1: duplicate key 'steps' (first at line 2)");
  CHECK(ErrorOf("m:\n  k: 1\n  k: 2\n") == "x.yaml:3:3: duplicate key 'k' (first at line 2)");
}

TEST_CASE("ParseYaml rejects a second document") {
  CHECK(ErrorOf("a: 1\n---\nb: 2\n") ==
        "x.yaml:2:1: file holds more than one YAML document (only one is allowed)");
}

TEST_CASE("ParseYaml turns yaml-cpp syntax errors into located diagnostics") {
  CHECK(ErrorOf("a: [1, 2\nb: 3\n") == "x.yaml:2:2: YAML syntax error: end of sequence flow not found");
  CHECK(ErrorOf("- a\nb: 1\n") ==
        "x.yaml:2:1: YAML syntax error: text after the end of the top-level value (check its indentation)");
  CHECK(ErrorOf("a: b: c\n") == "x.yaml:1:5: YAML syntax error: illegal map value");
  CHECK(ErrorOf("a: {b: 1\n") == "x.yaml:2:1: YAML syntax error: end of map flow not found");
  CHECK(ErrorOf("a: 1\n b: 2\n") == "x.yaml:2:3: YAML syntax error: illegal map value");
}

TEST_CASE("ParseYaml rejects anchors, aliases and complex keys") {
  CHECK(ErrorOf("a: &x 1\nb: *x\n") ==
        "x.yaml:1:4: YAML anchors (&name) are not supported; use defaults: blocks to share values");
  CHECK(ErrorOf("? [a, b]\n: 1\n") == "x.yaml:1:3: map keys must be plain text, not a sequence");
}

TEST_CASE("ParseYamlFile reads files and reports unreadable ones") {
  YamlParse missing = ParseYamlFile("/nonexistent/dir/plan.yaml");
  CHECK_FALSE(missing.ok);
  CHECK(missing.error.ToString() == "/nonexistent/dir/plan.yaml: cannot read file: No such file or directory");
  YamlParse dir = ParseYamlFile("/");
  CHECK(dir.error.ToString() == "/: cannot read file: Is a directory");

  std::string path = "yaml_tree_test_tmp.yaml";
  {
    std::ofstream out(path);
    out << "k: v\n";
  }
  std::string text;
  YamlParse ok = ParseYamlFile(path, &text);
  std::remove(path.c_str());
  REQUIRE(ok.ok);
  CHECK(text == "k: v\n");
  CHECK(ok.root.Find("k")->scalar == "v");
}

TEST_CASE("EmitYaml writes canonical block YAML") {
  YamlParse p = ParseYaml(
      "name: llama\nlist: [1, 2]\nmaps:\n  - {a: 1, b: [x]}\n  - c: 2\nnested: [[1, 2], []]\n"
      "empty_map: {}\nnothing: ~\n",
      "x.yaml");
  REQUIRE(p.ok);
  CHECK(EmitYaml(p.root) ==
        "name: llama\n"
        "list:\n"
        "  - 1\n"
        "  - 2\n"
        "maps:\n"
        "  - a: 1\n"
        "    b:\n"
        "      - x\n"
        "  - c: 2\n"
        "nested:\n"
        "  -\n"
        "    - 1\n"
        "    - 2\n"
        "  - []\n"
        "empty_map: {}\n"
        "nothing: null\n");
}

TEST_CASE("EmitYaml quotes scalars that would not read back the same") {
  const std::vector<std::string> tricky = {
      "",         "null",     "~",        " lead",     "trail ",   "a: b",      "a #b",
      "- x",      "-",        "[x]",      "{x}",       "#c",       "&a",        "*a",
      "!t",       "|",        ">",        "'q'",       "\"dq\"",   "%p",        "@a",
      "`b",       "key:",     "line\nbreak", "tab\there", "back\\slash", "a,b", "---",
      "\x01",     "ok-plain", "10G",      "2.1.1.1",   "rig0:2x4 rig1:2x4", "-5", "3.0e-4",
      "results/models/{plan}/{case_id}", "Can there be life somewhere in the Solar System outside Earth?"};
  YamlNode root;
  root.kind = YamlNode::Kind::kMap;
  for (size_t i = 0; i < tricky.size(); ++i) {
    YamlNode key, value;
    key.kind = value.kind = YamlNode::Kind::kScalar;
    key.scalar = "k" + std::to_string(i) + (i % 2 ? ": odd" : "");
    value.scalar = tricky[i];
    root.entries.emplace_back(key, value);
  }
  std::string text = EmitYaml(root);
  YamlParse back = ParseYaml(text, "emitted.yaml");
  INFO(text);
  REQUIRE_MESSAGE(back.ok, back.error.ToString());
  REQUIRE(back.root.entries.size() == tricky.size());
  for (size_t i = 0; i < tricky.size(); ++i) {
    CHECK(back.root.entries[i].first.scalar == root.entries[i].first.scalar);
    CHECK(back.root.entries[i].second.kind == YamlNode::Kind::kScalar);
    CHECK(back.root.entries[i].second.scalar == tricky[i]);
  }
  // Plain-safe text stays plain; a value marked quoted stays quoted.
  CHECK(text.find("\"k29: odd\": ok-plain\n") != std::string::npos);
  CHECK(text.find("k30: 10G\n") != std::string::npos);
  CHECK(text.find("k32: rig0:2x4 rig1:2x4\n") != std::string::npos);
  CHECK(text.find("k8: \"-\"\n") != std::string::npos);
  YamlNode quoted;
  quoted.kind = YamlNode::Kind::kScalar;
  quoted.scalar = "1000";
  quoted.quoted = true;
  CHECK(EmitYaml(quoted) == "\"1000\"\n");
}
