#ifndef PROTOCOL_RUNNER_BASE_PLACEHOLDERS_H_
#define PROTOCOL_RUNNER_BASE_PLACEHOLDERS_H_

// "{name}" placeholders in plan strings (output_dir, command argv, env).
// Substitution is textual inside one string: a value never splits an argv
// element and never reaches a shell unquoted (see command_backend.h).

#include <string>
#include <utility>
#include <vector>

namespace protocol {

using PlaceholderValues = std::vector<std::pair<std::string, std::string>>;

// Replaces each "{name}" whose name is in `values`; "{{" and "}}" are literal
// braces; unknown names are left as written (report them with
// UnknownPlaceholders first).
std::string ExpandPlaceholders(const std::string& text, const PlaceholderValues& values);

// Names used as "{name}" in `text` that are not in `known`, in order, without
// duplicates.
std::vector<std::string> UnknownPlaceholders(const std::string& text,
                                             const std::vector<std::string>& known);

// POSIX shell single-quoting: 'it'\''s' — safe for /bin/sh -c.
std::string ShellQuote(const std::string& value);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_PLACEHOLDERS_H_
