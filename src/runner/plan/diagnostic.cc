#include "runner/plan/diagnostic.h"

#include "runner/base/text.h"

namespace protocol {

std::string Diagnostic::ToString() const {
  std::string out = where.ToString();
  if (!out.empty()) out += ": ";
  out += message;
  if (!hint.empty()) out += " (" + hint + ")";
  return out;
}

std::string RenderDiagnostics(const std::vector<Diagnostic>& diagnostics,
                              const std::string& source_text) {
  std::vector<std::string> lines = Split(source_text, '\n');
  std::string out;
  for (const auto& d : diagnostics) {
    out += d.ToString();
    out += '\n';
    if (d.where.line >= 1 && static_cast<size_t>(d.where.line) <= lines.size()) {
      std::string line = lines[d.where.line - 1];
      if (!line.empty() && line.back() == '\r') line.pop_back();
      out += "  " + line + "\n";
      if (d.where.column >= 1) {
        std::string caret = "  ";
        // Keep tabs so the caret lines up under the offending column.
        for (int i = 0; i < d.where.column - 1 && i < static_cast<int>(line.size()); ++i)
          caret += line[i] == '\t' ? '\t' : ' ';
        out += caret + "^\n";
      }
    }
  }
  return out;
}

}  // namespace protocol
