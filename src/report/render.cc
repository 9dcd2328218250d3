#include "report/render.h"

#include <kainjow/mustache.hpp>

namespace protocol {

namespace {

namespace mu = kainjow::mustache;

// Builds the mustache view in place: kainjow's set() and push_back() copy
// their argument deeply, so a nested view built bottom-up with them is copied
// once per level (at nightly scale, most of the render time). Object members
// are move-assigned through operator[]; list elements are appended by move
// to the list the data owns (list_value() is const only to its readers).
mu::data ToData(const Json& j) {
  switch (j.type()) {
    case Json::value_t::object: {
      mu::data d{mu::data::type::object};
      for (auto it = j.begin(); it != j.end(); ++it) d[it.key()] = ToData(it.value());
      return d;
    }
    case Json::value_t::array: {
      mu::data d{mu::data::type::list};
      auto& list = const_cast<mu::basic_list<std::string>&>(d.list_value());
      list.reserve(j.size());
      for (const auto& e : j) list.push_back(ToData(e));
      return d;
    }
    case Json::value_t::string: {
      // "" is false, as in mustache.js: {{#x}}...{{/x}} skips an empty x.
      const auto& text = j.get_ref<const std::string&>();
      if (text.empty()) return mu::data{false};
      return mu::data{text};
    }
    case Json::value_t::boolean:
      return mu::data{j.get<bool>()};
    case Json::value_t::null:
    case Json::value_t::discarded:
      return mu::data{false};
    default:
      return mu::data{j.dump()};
  }
}

}  // namespace

std::string CollapseBlankLines(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  size_t newlines = 0;
  for (char c : text) {
    newlines = c == '\n' ? newlines + 1 : 0;
    if (newlines <= 2) out += c;
  }
  return out;
}

std::string MarkdownEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '|': out += "\\|"; break;
      case '\r':
      case '\n': out += ' '; break;
      default: out += c;
    }
  }
  return out;
}

Result<std::string> RenderTemplate(const std::string& template_text, const std::string& template_name,
                                   const Json& view, Escape escape) {
  mu::mustache tmpl{template_text};
  if (!tmpl.is_valid()) {
    return Status::InvalidArgument(template_name + ": " + tmpl.error_message());
  }
  if (escape == Escape::kMarkdown) tmpl.set_custom_escape(MarkdownEscape);
  std::string out = tmpl.render(ToData(view));
  if (!tmpl.is_valid()) {
    return Status::InvalidArgument(template_name + ": " + tmpl.error_message());
  }
  if (escape == Escape::kMarkdown) out = CollapseBlankLines(out);
  return out;
}

}  // namespace protocol
