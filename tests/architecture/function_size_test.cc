// No function body in src/ is longer than kMaxBodyLines lines
// (docs/architecture.md, rules of thumb). A small scanner finds the bodies:
//   1. StripNonCode blanks comments, string and character literals (raw
//      strings included) and preprocessor lines, keeping every newline, so a
//      brace in any of them is not code and line numbers stay true.
//   2. FindFunctionBodies walks the braces. A `{` at namespace or class scope
//      opens a function body when the text before it (since the last `;`, or
//      the last scope opened or closed) ends in a parameter list `(...)`
//      followed only by qualifiers (const, override, noexcept, final,
//      `-> type`, ...) or a constructor's member-initialiser list. `namespace`
//      and `extern "C"` open a namespace scope; `class`, `struct` and `union`
//      a class scope; anything else (`enum`, `= {` initialisers, a member's
//      `{}` initialiser, a lambda assigned to a variable) is skipped whole.
//   3. A body's length is the line of its closing `}` minus the line of its
//      opening `{` (as clang-tidy's readability-function-size counts lines),
//      lambdas and local classes inside it included.
#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "test_files.h"

namespace protocol {
namespace {
namespace fs = std::filesystem;

constexpr int kMaxBodyLines = 120;


struct FunctionBody {
  std::string name;  // as written before the parameter list, e.g. "Runner::Run"
  int line = 0;      // of the opening `{`
  int lines = 0;     // line of the closing `}` minus `line`
};

bool IsIdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// Blanks text[from, to) except newlines.
void Blank(std::string& text, size_t from, size_t to) {
  for (size_t i = from; i < to && i < text.size(); ++i)
    if (text[i] != '\n') text[i] = ' ';
}

// The identifier or number directly before position i ("" when none).
std::string WordBefore(const std::string& text, size_t i) {
  size_t start = i;
  while (start > 0 && IsIdentifierChar(text[start - 1])) --start;
  return text.substr(start, i - start);
}

// End (one past) of the literal opening with the quote at `open`; a
// backslash escapes the next character.
size_t EndOfQuoted(const std::string& text, size_t open) {
  const char quote = text[open];
  size_t i = open + 1;
  while (i < text.size() && text[i] != quote) i += text[i] == '\\' ? 2 : 1;
  return std::min(text.size(), i + 1);
}

// End (one past) of the raw string R"delim( ... )delim" whose `"` is at `open`.
size_t EndOfRawString(const std::string& text, size_t open) {
  const size_t paren = text.find('(', open);
  if (paren == std::string::npos) return text.size();
  const std::string close = ")" + text.substr(open + 1, paren - open - 1) + "\"";
  const size_t end = text.find(close, paren);
  return end == std::string::npos ? text.size() : end + close.size();
}

// End of the preprocessor line starting at `hash`, backslash continuations included.
size_t EndOfDirective(const std::string& text, size_t hash) {
  size_t i = hash;
  while (i < text.size() && text[i] != '\n') i += text[i] == '\\' ? 2 : 1;
  return std::min(text.size(), i);
}

// The text with comments, string and character literals (raw strings too)
// and preprocessor lines replaced by spaces; newlines are kept.
std::string StripNonCode(std::string text) {
  bool line_start = true;  // only whitespace since the last newline
  size_t i = 0;
  while (i < text.size()) {
    const char c = text[i];
    const char next = i + 1 < text.size() ? text[i + 1] : '\0';
    size_t end = i;
    if (c == '#' && line_start) {
      end = EndOfDirective(text, i);
    } else if (c == '/' && next == '/') {
      end = text.find('\n', i);
      if (end == std::string::npos) end = text.size();
    } else if (c == '/' && next == '*') {
      end = text.find("*/", i + 2);
      end = end == std::string::npos ? text.size() : end + 2;
    } else if (c == '"') {
      const std::string prefix = WordBefore(text, i);
      const bool raw = prefix == "R" || prefix == "u8R" || prefix == "uR" || prefix == "UR" || prefix == "LR";
      end = raw ? EndOfRawString(text, i) : EndOfQuoted(text, i);
    } else if (c == '\'') {
      // 1'000'000: a digit separator inside a number, not a literal.
      const std::string word = WordBefore(text, i);
      const bool separator = !word.empty() && std::isdigit(static_cast<unsigned char>(word[0]));
      if (!separator) end = EndOfQuoted(text, i);
    }
    if (end > i) {
      Blank(text, i, end);
      i = end;
      continue;
    }
    if (c == '\n') line_start = true;
    else if (!std::isspace(static_cast<unsigned char>(c))) line_start = false;
    ++i;
  }
  return text;
}

// A token of stripped code: an identifier (operator names joined, e.g.
// "operator==", "operator()"), a bracketed group "(...)", "{...}", "[...]"
// collapsed to one token, or a punctuator ("::", "->", "&&", "=", ...).
struct Token {
  std::string text;
  char group = 0;  // '(' / '{' / '[' for a collapsed group
};

// Index one past the bracket matching the one at `open`.
size_t MatchingClose(const std::string& code, size_t open) {
  int depth = 0;
  for (size_t i = open; i < code.size(); ++i) {
    const char c = code[i];
    if (c == '(' || c == '{' || c == '[') ++depth;
    else if ((c == ')' || c == '}' || c == ']') && --depth == 0) return i + 1;
  }
  return code.size();
}

std::vector<Token> Tokenize(const std::string& code) {
  static const std::vector<std::string> kPunctuators = {"::", "->", "&&", "==", "!=", "<=", ">=", "||"};
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (c == '(' || c == '{' || c == '[') {
      const size_t end = MatchingClose(code, i);
      tokens.push_back({code.substr(i, end - i), c});
      i = end;
    } else if (IsIdentifierChar(c)) {
      size_t end = i;
      while (end < code.size() && IsIdentifierChar(code[end])) ++end;
      std::string word = code.substr(i, end - i);
      if (word == "operator") {
        // The operator's symbol (or "()") is part of its name.
        while (end < code.size() && std::isspace(static_cast<unsigned char>(code[end]))) ++end;
        if (code.compare(end, 2, "()") == 0) end += 2;
        while (end < code.size() && std::string("=!<>+-*/%&|^~,[]").find(code[end]) != std::string::npos) ++end;
        word = "operator" + code.substr(i + 8, end - i - 8);
        word.erase(std::remove_if(word.begin(), word.end(), [](char ch) { return ch == ' ' || ch == '\n'; }),
                   word.end());
      }
      tokens.push_back({word, 0});
      i = end;
    } else {
      std::string punctuator(1, c);
      for (const std::string& p : kPunctuators)
        if (code.compare(i, p.size(), p) == 0) punctuator = p;
      tokens.push_back({punctuator, 0});
      i += punctuator.size();
    }
  }
  return tokens;
}

// Drops leading `template <...>` clauses.
std::vector<Token> WithoutTemplateClauses(std::vector<Token> tokens) {
  size_t i = 0;
  while (i + 1 < tokens.size() && tokens[i].text == "template" && tokens[i + 1].text == "<") {
    int depth = 0;
    for (++i; i < tokens.size(); ++i) {
      if (tokens[i].text == "<") ++depth;
      else if (tokens[i].text == ">" && --depth == 0) break;
    }
    ++i;
  }
  tokens.erase(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(std::min(i, tokens.size())));
  return tokens;
}

// What may follow a parameter list before the body: qualifiers, `-> type`,
// `: member-initialisers`, a function-try-block.
bool IsQualifier(const std::string& t) {
  static const std::set<std::string> kQualifiers = {"const", "volatile", "noexcept", "override", "final", "mutable",
                                                    "&",     "&&",       "throw",    "->",       ":",     "try"};
  return kQualifiers.count(t) > 0;
}

enum class Opening { kNamespace, kClass, kFunction, kOther };

// The (qualified) name whose last token is tokens[k]: "Run", "Runner::Run",
// "~Sink", "Vocabulary" (template arguments dropped); "" when there is none.
std::string NameEndingAt(const std::vector<Token>& tokens, size_t k) {
  if (tokens[k].text == ">") {  // f<T>(...)
    int depth = 0;
    for (; k > 0; --k) {
      if (tokens[k].text == ">") ++depth;
      else if (tokens[k].text == "<" && --depth == 0) break;
    }
    if (k == 0) return "";
    --k;
  }
  std::string name = tokens[k].text;
  if (!IsIdentifierChar(name.back()) && name.rfind("operator", 0) != 0) return "";
  if (k >= 1 && tokens[k - 1].text == "~") {
    name = "~" + name;
    --k;
  }
  while (k >= 2 && tokens[k - 1].text == "::" && IsIdentifierChar(tokens[k - 2].text.back())) {
    name = tokens[k - 2].text + "::" + name;
    k -= 2;
  }
  return name;
}

// What the `{` after `head` (the code since the last `;` or scope brace, not
// inside parentheses) opens; for a function, *name is set.
Opening Classify(const std::string& head, std::string* name) {
  const std::vector<Token> tokens = WithoutTemplateClauses(Tokenize(head));
  if (tokens.empty()) return Opening::kOther;
  for (const Token& t : tokens)
    if (t.text == "namespace") return Opening::kNamespace;
  if (tokens.size() == 1 && tokens[0].text == "extern") return Opening::kNamespace;  // extern "C" {
  for (const Token& t : tokens) {
    if (t.group == '(' || t.text == "=") break;  // a declarator, not a class head
    if (t.text == "enum") return Opening::kOther;
    if (t.text == "class" || t.text == "struct" || t.text == "union") return Opening::kClass;
  }
  // The parameter list: a (...) after a name, followed only by qualifiers,
  // a trailing return type or a member-initialiser list.
  for (size_t i = 1; i < tokens.size(); ++i) {
    if (tokens[i - 1].text == "=") return Opening::kOther;  // an initialiser
    if (tokens[i].group != '(') continue;
    if (i + 1 < tokens.size() && !IsQualifier(tokens[i + 1].text)) continue;
    *name = NameEndingAt(tokens, i - 1);
    if (!name->empty()) return Opening::kFunction;
  }
  return Opening::kOther;
}

// Every function body of one file's text (a .cc or .h), in file order.
std::vector<FunctionBody> FindFunctionBodies(const std::string& text) {
  const std::string code = StripNonCode(text);
  std::vector<FunctionBody> bodies;
  std::vector<int> line_of(code.size() + 1, 1);
  for (size_t i = 0; i < code.size(); ++i) line_of[i + 1] = line_of[i] + (code[i] == '\n' ? 1 : 0);
  // Only a `{` at namespace or class scope is reached here: function bodies
  // and initialisers are skipped whole.
  size_t head_start = 0;  // where the current declaration's text starts
  int parens = 0;         // open `(` since head_start
  size_t i = 0;
  while (i < code.size()) {
    const char c = code[i];
    if (c == '(') ++parens;
    else if (c == ')') --parens;
    if (c == ';' || c == '}') {
      head_start = i + 1;
      parens = 0;
    } else if (c == '{') {
      std::string name;
      const Opening opening =
          parens > 0 ? Opening::kOther : Classify(code.substr(head_start, i - head_start), &name);
      if (opening == Opening::kNamespace || opening == Opening::kClass) {
        head_start = i + 1;
      } else {
        const size_t end = MatchingClose(code, i);  // one past the matching `}`
        if (opening == Opening::kFunction) {
          bodies.push_back({name, line_of[i], line_of[end - 1] - line_of[i]});
          head_start = end;
        }
        i = end;  // an initialiser's braces stay part of the head
        continue;
      }
    }
    ++i;
  }
  return bodies;
}

// "<n> lines" of a file holding one function `name` whose body has `lines` lines.
std::string FunctionOfLines(const std::string& signature, int lines) {
  std::string text = signature + " {\n";
  for (int i = 1; i < lines; ++i) text += "  x += 1;\n";
  return text + "}\n";
}

// The names of the functions found in `text` ("f g"), all or only those
// over the limit.
std::string Names(const std::string& text, bool only_long = false) {
  std::string out;
  for (const FunctionBody& f : FindFunctionBodies(text))
    if (!only_long || f.lines > kMaxBodyLines) out += (out.empty() ? "" : " ") + f.name;
  return out;
}
std::string LongFunctions(const std::string& text) { return Names(text, true); }

TEST_CASE("a body of 121 lines is too long, 120 is not (closing line minus opening line)") {
  CHECK(LongFunctions(FunctionOfLines("int f(int x)", 121)) == "f");
  CHECK(LongFunctions(FunctionOfLines("int f(int x)", 120)) == "");
  const std::vector<FunctionBody> bodies =
      FindFunctionBodies("// header\n" + FunctionOfLines("int f(int x)", 7) + FunctionOfLines("void g()", 3));
  REQUIRE(bodies.size() == 2);
  CHECK(bodies[0].line == 2);
  CHECK(bodies[0].lines == 7);
  CHECK(bodies[1].line == 10);
  CHECK(bodies[1].lines == 3);
}

TEST_CASE("lambdas and local classes inside a function count toward it") {
  std::string text = "void f() {\n  auto g = [&](int y) {\n";
  for (int i = 0; i < 60; ++i) text += "    y += 1;\n";
  text += "  };\n  struct Local {\n    int h() {\n";
  for (int i = 0; i < 60; ++i) text += "      return 1;\n";
  text += "    }\n  };\n}\n";
  CHECK(Names(text) == "f");
  CHECK(LongFunctions(text) == "f");
}

TEST_CASE("braces in comments, strings, character literals, raw strings and directives are not code") {
  const std::string text =
      "// void commented() {\n"
      "/* int block() { */\n"
      "#define BODY() {\n"
      "#define LONG(x) \\\n  {\n"
      "const char* s = \"{ \\\" {\";\n"
      "const char c = '{', d = '\\'', e = '}';\n"
      "long n = 1'000'000;\n"
      "const char* r = R\"x(not ) code { \" )\" }\n{)x\";\n"
      "int f() {\n  return '}';\n}\n"
      "int g() { return 0; }\n";
  CHECK(Names(text) == "f g");
  const std::vector<FunctionBody> bodies = FindFunctionBodies(text);
  REQUIRE(bodies.size() == 2);
  CHECK(bodies[0].line == 11);
  CHECK(bodies[0].lines == 2);
  CHECK(bodies[1].line == 14);
}

TEST_CASE("member functions, constructors with initialiser lists and qualifiers are found") {
  const std::string text =
      "namespace a {\n"
      "namespace {\n"
      "class Sink : public Base<int> {\n"
      " public:\n"
      "  Sink(int a, int b)\n      : a_(a), b_{b}, c_{{1, 2}} {\n    Init();\n  }\n"
      "  ~Sink() override {}\n"
      "  int Get() const noexcept { return a_; }\n"
      "  void Put(int) override final {}\n"
      "  auto Size() const -> std::vector<int>::size_type { return 0; }\n"
      "  bool operator==(const Sink& o) const { return a_ == o.a_; }\n"
      "  int operator()(int x) { return x; }\n"
      "  int a_ = 0;\n  int b_{0};\n  std::vector<int> c_{};\n"
      "  YamlNode empty_ = [] {\n    YamlNode n;\n    return n;\n  }();\n"
      "};\n"
      "}  // namespace\n"
      "template <typename T, typename U = std::vector<T>>\nT Make(U u) { return T(); }\n"
      "std::function<void(int)> Callback() { return {}; }\n"
      "Runner::Runner(Store& s) : store_(s) {}\n"
      "Result<bool> Runner::RunCase(int i) {\n  return true;\n}\n"
      "}  // namespace a\n";
  CHECK(Names(text) == "Sink ~Sink Get Put Size operator== operator() Make Callback Runner::Runner Runner::RunCase");
}

TEST_CASE("namespaces, classes, enums and initialisers are not functions") {
  const std::string text =
      "namespace a::b {\n"
      "extern \"C\" {\nint c_function(void) { return 0; }\n}\n"
      "struct X {\n  int a;\n};\n"
      "enum class Kind { kA, kB };\n"
      "enum Plain : int { kC = 1 };\n"
      "const int kTable[] = {1, 2, 3};\n"
      "const std::vector<std::pair<int, int>> kPairs = {{1, 2}, {3, 4}};\n"
      "std::map<int, int> kMap{{1, 2}};\n"
      "const auto kDefault = Make({1, 2});\n"
      "static const auto kLambda = [](int x) {\n  return x;\n};\n"
      "union U {\n  int i;\n  float f;\n};\n"
      "template <>\nstruct Traits<int> {\n  static int Value() { return 1; }\n};\n"
      "}  // namespace a::b\n";
  CHECK(Names(text) == "c_function Value");
}

// Every .cc and .h under src/, relative to it, in a stable order.
std::vector<std::string> SourceFiles(const fs::path& src) {
  std::vector<std::string> files;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (entry.is_regular_file() && (ext == ".cc" || ext == ".h"))
      files.push_back(fs::relative(entry.path(), src).generic_string());
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST_CASE("no function body in src/ is longer than 120 lines") {
  const fs::path src = fs::path(PROTOCOL_SOURCE_DIR) / "src";
  const std::vector<std::string> files = SourceFiles(src);
  REQUIRE(files.size() > 50);
  int functions = 0;
  for (const std::string& file : files) {
    const std::string text = testing::ReadTextFile((src / file).string());
    REQUIRE_MESSAGE(!text.empty(), ("cannot read src/" + file));
    for (const FunctionBody& f : FindFunctionBodies(text)) {
      ++functions;
      if (f.lines <= kMaxBodyLines) continue;
      FAIL_CHECK(("src/" + file + ":" + std::to_string(f.line) + ": function '" + f.name + "' has " +
                  std::to_string(f.lines) + " lines (at most " + std::to_string(kMaxBodyLines) +
                  "): split it into named steps"));
    }
  }
  // The scanner sees the tree's functions (a broken scanner would pass vacuously).
  CHECK(functions > 500);
}

}  // namespace
}  // namespace protocol
