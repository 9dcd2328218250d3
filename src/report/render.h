#ifndef PROTOCOL_REPORT_RENDER_H_
#define PROTOCOL_REPORT_RENDER_H_

// Mustache rendering: the one file that includes <kainjow/mustache.hpp> is
// render.cc. The view is JSON (report_json.h): objects become mustache
// objects, arrays lists, booleans and null booleans (null is false), the
// empty string false (renders as nothing; skips {{#x}} sections, as in
// mustache.js), other strings strings, numbers their JSON text.

#include <string>

#include "runner/base/json.h"
#include "runner/base/status.h"

namespace protocol {

enum class Escape {
  kHtml,      // {{x}}: & < > " ' as entities (mustache's default)
  kMarkdown,  // {{x}}: < > as entities, | as \|, CR/LF as a space; and the
              // output's runs of blank lines collapse to one (mustache leaves a
              // blank line where a false section stood on its own lines)
};

// Renders `template_text` with `view`. kInvalidArgument with mustache's
// message (prefixed by `template_name`) when the template does not parse.
Result<std::string> RenderTemplate(const std::string& template_text, const std::string& template_name,
                                   const Json& view, Escape escape);

std::string MarkdownEscape(const std::string& text);
// Replaces every run of two or more blank lines by one blank line.
std::string CollapseBlankLines(const std::string& text);

}  // namespace protocol

#endif  // PROTOCOL_REPORT_RENDER_H_
