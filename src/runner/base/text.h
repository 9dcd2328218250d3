#ifndef PROTOCOL_RUNNER_BASE_TEXT_H_
#define PROTOCOL_RUNNER_BASE_TEXT_H_

// String helpers and formatting: the one place that includes fmt.

#include <fmt/format.h>

#include <string>
#include <string_view>
#include <vector>

#include "runner/base/status.h"

namespace protocol {

std::string Join(const std::vector<std::string>& parts, std::string_view sep);
std::vector<std::string> Split(std::string_view text, char sep);
std::string Trim(std::string_view text);
bool StartsWith(std::string_view text, std::string_view prefix);
bool EndsWith(std::string_view text, std::string_view suffix);

// The whole file at `path`. On failure the status (kNotFound when it does not
// exist, else kIoError) carries only the system's reason, e.g. "Is a
// directory", so each caller can say what the file was for.
Result<std::string> ReadFileText(const std::string& path);

// One CSV field per RFC 4180: quoted (with "" for \") only when it holds a
// comma, a quote, CR or LF.
std::string CsvField(const std::string& text);

// Edit distance with adjacent transpositions (optimal string alignment).
int EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a plausible
// typo (distance <= max(1, len/3)); empty otherwise.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_TEXT_H_
