// YAML → YamlNode with 1-based locations. The only file that includes yaml-cpp.
//
// We drive yaml-cpp's event parser (not YAML::Load) so that every node keeps
// its own mark, map entries keep file order, and duplicate keys are caught
// (YAML::Load silently keeps one of them).
//
// Not supported, rejected with a located message: anchors (&a), aliases (*a)
// and therefore merge keys (<<: *a); non-scalar map keys. Plans have
// `defaults:` blocks for sharing values instead.

#include "runner/plan/yaml_tree.h"

#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "runner/base/text.h"

namespace protocol {

const YamlNode* YamlNode::Find(const std::string& key) const {
  if (kind != Kind::kMap) return nullptr;
  for (const auto& [k, v] : entries)
    if (k.scalar == key) return &v;
  return nullptr;
}

YamlNode* YamlNode::Find(const std::string& key) {
  return const_cast<YamlNode*>(static_cast<const YamlNode*>(this)->Find(key));
}

const char* YamlNode::KindName() const {
  switch (kind) {
    case Kind::kNull: return "null";
    case Kind::kScalar: return "scalar";
    case Kind::kSequence: return "sequence";
    case Kind::kMap: return "map";
  }
  return "?";
}

namespace {

// Builds the tree from parser events. The first problem found is kept in
// `error`; later events are still consumed but ignored.
class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(std::string file) : file_(std::move(file)) {}

  bool failed() const { return failed_; }
  const Diagnostic& error() const { return error_; }
  bool has_root() const { return has_root_; }
  YamlNode& root() { return root_; }

  void Fail(const YAML::Mark& mark, std::string message) {
    if (failed_) return;
    failed_ = true;
    error_.where = {file_, mark.line + 1, mark.column + 1};
    error_.message = std::move(message);
  }

  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t anchor) override {
    CheckAnchor(mark, anchor);
    YamlNode node = Located(mark);
    node.kind = YamlNode::Kind::kNull;
    Add(std::move(node));
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    Fail(mark, "YAML aliases (*name) and merge keys are not supported; write the value out");
    Add(Located(mark));
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t anchor,
                const std::string& value) override {
    CheckAnchor(mark, anchor);
    YamlNode node = Located(mark);
    node.kind = YamlNode::Kind::kScalar;
    node.scalar = value;
    // yaml-cpp tags quoted and block scalars "!", plain ones "?"; an explicit
    // !!str makes the text a string as quoting would.
    node.quoted = tag == "!" || tag == "tag:yaml.org,2002:str";
    Add(std::move(node));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                       YAML::EmitterStyle::value) override {
    CheckAnchor(mark, anchor);
    YamlNode node = Located(mark);
    node.kind = YamlNode::Kind::kSequence;
    Open(std::move(node));
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t anchor,
                  YAML::EmitterStyle::value) override {
    CheckAnchor(mark, anchor);
    YamlNode node = Located(mark);
    node.kind = YamlNode::Kind::kMap;
    Open(std::move(node));
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    YamlNode node;
    bool has_key = false;  // maps: a key waits for its value
    YamlNode key;
  };

  static YamlNode Located(const YAML::Mark& mark) {
    YamlNode node;
    node.line = mark.line + 1;
    node.column = mark.column + 1;
    return node;
  }

  void CheckAnchor(const YAML::Mark& mark, YAML::anchor_t anchor) {
    if (anchor != YAML::NullAnchor)
      Fail(mark, "YAML anchors (&name) are not supported; use defaults: blocks to share values");
  }

  void Open(YamlNode node) { stack_.push_back(Frame{std::move(node), false, {}}); }

  void Close() {
    if (stack_.empty()) return;
    YamlNode node = std::move(stack_.back().node);
    stack_.pop_back();
    Add(std::move(node));
  }

  void Add(YamlNode node) {
    if (stack_.empty()) {
      root_ = std::move(node);
      has_root_ = true;
      return;
    }
    Frame& top = stack_.back();
    if (top.node.kind == YamlNode::Kind::kSequence) {
      top.node.items.push_back(std::move(node));
      return;
    }
    if (!top.has_key) {
      if (node.kind != YamlNode::Kind::kScalar) {
        YAML::Mark mark;
        mark.line = node.line - 1;
        mark.column = node.column - 1;
        Fail(mark, fmt::format("map keys must be plain text, not a {}", node.KindName()));
      }
      top.key = std::move(node);
      top.has_key = true;
      return;
    }
    if (node.kind == YamlNode::Kind::kNull && node.line > top.key.line) {
      // "key:" with nothing after it: yaml-cpp marks the next token; point at the key.
      node.line = top.key.line;
      node.column = top.key.column;
    }
    for (const auto& [k, v] : top.node.entries) {
      if (k.scalar == top.key.scalar) {
        YAML::Mark mark;
        mark.line = top.key.line - 1;
        mark.column = top.key.column - 1;
        Fail(mark, fmt::format("duplicate key '{}' (first at line {})", k.scalar, k.line));
        break;
      }
    }
    top.node.entries.emplace_back(std::move(top.key), std::move(node));
    top.key = YamlNode();
    top.has_key = false;
  }

  std::string file_;
  std::vector<Frame> stack_;
  YamlNode root_;
  bool has_root_ = false;
  bool failed_ = false;
  Diagnostic error_;
};

YamlParse Failure(const std::string& file, int line, int column, std::string message) {
  YamlParse out;
  out.error.where = {file, line, column};
  out.error.message = std::move(message);
  return out;
}

// Byte offset of the first NUL or invalid UTF-8 sequence, or -1.
long FindBinary(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    uint32_t cp = 0;
    const size_t n = DecodeUtf8(text, i, &cp);
    if (n == 0 || cp == 0) return static_cast<long>(i);
    i += n;
  }
  return -1;
}

}  // namespace

YamlParse ParseYaml(const std::string& text, const std::string& file) {
  long binary = FindBinary(text);
  if (binary >= 0)
    return Failure(file, 0, 0, fmt::format("file is not text (binary data at byte {})", binary));

  std::istringstream in(text);
  TreeBuilder builder(file);
  try {
    YAML::Parser parser(in);
    if (!parser.HandleNextDocument(builder)) return Failure(file, 0, 0, "file is empty");
    if (builder.failed()) {
      YamlParse out;
      out.error = builder.error();
      return out;
    }
    // A second document: report where it starts.
    class FirstMark : public YAML::EventHandler {
     public:
      bool seen = false;
      YAML::Mark mark;
      void OnDocumentStart(const YAML::Mark& m) override {
        if (!seen) { seen = true; mark = m; }
      }
      void OnDocumentEnd() override {}
      void Note(const YAML::Mark& m) {
        if (!seen) { seen = true; mark = m; }
      }
      void OnNull(const YAML::Mark& m, YAML::anchor_t) override { Note(m); }
      void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { Note(m); }
      void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string&) override { Note(m); }
      void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { Note(m); }
      void OnSequenceEnd() override {}
      void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override { Note(m); }
      void OnMapEnd() override {}
    } second;
    if (parser.HandleNextDocument(second)) {
      // yaml-cpp also starts a new document when text follows a finished
      // top-level block without "---"; say which case it is.
      size_t pos = static_cast<size_t>(std::max(0, second.mark.pos));
      bool marker = text.compare(pos, 3, "---") == 0;
      return Failure(file, second.mark.line + 1, second.mark.column + 1,
                     marker ? "file holds more than one YAML document (only one is allowed)"
                            : "YAML syntax error: text after the end of the top-level value "
                              "(check its indentation)");
    }
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) return Failure(file, 0, 0, "YAML syntax error: " + e.msg);
    return Failure(file, e.mark.line + 1, e.mark.column + 1, "YAML syntax error: " + e.msg);
  } catch (const std::exception& e) {
    return Failure(file, 0, 0, std::string("YAML syntax error: ") + e.what());
  }
  YamlParse out;
  out.ok = true;
  out.root = std::move(builder.root());
  return out;
}

YamlParse ParseYamlFile(const std::string& path, std::string* text_out) {
  auto read = ReadFileText(path);
  if (!read.ok()) return Failure(path, 0, 0, "cannot read file: " + read.status().message());
  std::string text = std::move(read).value();
  if (text_out) *text_out = text;
  return ParseYaml(text, path);
}

// ---- emitting ----------------------------------------------------------------

namespace {

bool IsNullWord(const std::string& s) {
  return s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// True when `s` written plain would not read back as the same scalar text.
bool NeedsQuotes(const std::string& s) {
  if (s.empty() || IsNullWord(s)) return true;
  if (s.front() == ' ' || s.back() == ' ' || s.front() == '\t' || s.back() == '\t') return true;
  static const std::string kIndicators = "[]{},#&*!|>'\"%@`";
  if (kIndicators.find(s.front()) != std::string::npos) return true;
  if ((s.front() == '-' || s.front() == '?' || s.front() == ':') &&
      (s.size() == 1 || s[1] == ' ' || s[1] == '\t'))
    return true;
  if (s == "---" || s == "...") return true;
  if (s.back() == ':') return true;
  for (size_t i = 0; i < s.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7F) return true;  // newline, tab, control characters
    if (c == ':' && i + 1 < s.size() && (s[i + 1] == ' ' || s[i + 1] == '\t')) return true;
    if (c == '#' && i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) return true;
    // Flow indicators would break a plain scalar inside flow context only, but
    // quoting them keeps the output readable by any YAML reader.
    if (c == ',' || c == '[' || c == ']' || c == '{' || c == '}') return true;
  }
  return false;
}

std::string DoubleQuote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20 || c == 0x7F) out += fmt::format("\\x{:02x}", c);
        else out += static_cast<char>(c);
    }
  }
  out += '"';
  return out;
}

std::string ScalarText(const YamlNode& node) {
  if (node.kind == YamlNode::Kind::kNull) return "null";
  if (node.quoted || NeedsQuotes(node.scalar)) return DoubleQuote(node.scalar);
  return node.scalar;
}

bool IsInline(const YamlNode& node) {
  return node.kind == YamlNode::Kind::kNull || node.kind == YamlNode::Kind::kScalar ||
         (node.kind == YamlNode::Kind::kSequence && node.items.empty()) ||
         (node.kind == YamlNode::Kind::kMap && node.entries.empty());
}

std::string InlineText(const YamlNode& node) {
  if (node.kind == YamlNode::Kind::kSequence) return "[]";
  if (node.kind == YamlNode::Kind::kMap) return "{}";
  return ScalarText(node);
}

void EmitBlock(const YamlNode& node, int indent, std::string& out);

// Writes map entries; the first line's indentation is already written when
// `first_inline` (used after "- ").
void EmitEntries(const YamlNode& map, int indent, bool first_inline, std::string& out) {
  bool first = true;
  for (const auto& [key, value] : map.entries) {
    if (!(first && first_inline)) out.append(indent, ' ');
    first = false;
    out += ScalarText(key);
    out += ':';
    if (IsInline(value)) {
      out += ' ';
      out += InlineText(value);
      out += '\n';
    } else {
      out += '\n';
      EmitBlock(value, indent + 2, out);
    }
  }
}

void EmitBlock(const YamlNode& node, int indent, std::string& out) {
  if (IsInline(node)) {
    out.append(indent, ' ');
    out += InlineText(node);
    out += '\n';
    return;
  }
  if (node.kind == YamlNode::Kind::kMap) {
    EmitEntries(node, indent, false, out);
    return;
  }
  for (const auto& item : node.items) {
    out.append(indent, ' ');
    out += "- ";
    if (IsInline(item)) {
      out += InlineText(item);
      out += '\n';
    } else if (item.kind == YamlNode::Kind::kMap) {
      EmitEntries(item, indent + 2, true, out);
    } else {
      // A sequence inside a sequence: start it on the next line.
      out.pop_back();
      out += '\n';
      EmitBlock(item, indent + 2, out);
    }
  }
}

}  // namespace

std::string EmitYaml(const YamlNode& node) {
  std::string out;
  EmitBlock(node, 0, out);
  return out;
}

}  // namespace protocol
