#include "runner/base/placeholders.h"

#include <algorithm>
#include <cctype>

namespace protocol {
namespace {

// Calls on_literal(text) and on_name(name, raw) for each piece of `text`.
template <typename Literal, typename Name>
void Scan(const std::string& text, Literal on_literal, Name on_name) {
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if ((c == '{' || c == '}') && i + 1 < text.size() && text[i + 1] == c) {
      on_literal(std::string(1, c));
      i += 2;
      continue;
    }
    if (c == '{') {
      size_t close = text.find('}', i + 1);
      if (close != std::string::npos) {
        std::string name = text.substr(i + 1, close - i - 1);
        bool identifier = !name.empty() && std::all_of(name.begin(), name.end(), [](char ch) {
          return std::isalnum(static_cast<unsigned char>(ch)) || ch == '_';
        });
        if (identifier) {
          on_name(name, text.substr(i, close - i + 1));
          i = close + 1;
          continue;
        }
      }
    }
    on_literal(std::string(1, c));
    ++i;
  }
}

}  // namespace

std::string ExpandPlaceholders(const std::string& text, const PlaceholderValues& values) {
  std::string out;
  Scan(
      text, [&](const std::string& literal) { out += literal; },
      [&](const std::string& name, const std::string& raw) {
        for (const auto& [key, value] : values) {
          if (key == name) {
            out += value;
            return;
          }
        }
        out += raw;
      });
  return out;
}

std::vector<std::string> UnknownPlaceholders(const std::string& text,
                                             const std::vector<std::string>& known) {
  std::vector<std::string> unknown;
  Scan(
      text, [](const std::string&) {},
      [&](const std::string& name, const std::string&) {
        if (std::find(known.begin(), known.end(), name) == known.end() &&
            std::find(unknown.begin(), unknown.end(), name) == unknown.end())
          unknown.push_back(name);
      });
  return unknown;
}

std::string ShellQuote(const std::string& value) {
  std::string out = "'";
  for (char c : value) {
    if (c == '\'') out += "'\\''";
    else out += c;
  }
  return out + "'";
}

}  // namespace protocol
