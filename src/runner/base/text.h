#ifndef PROTOCOL_RUNNER_BASE_TEXT_H_
#define PROTOCOL_RUNNER_BASE_TEXT_H_

// String helpers and formatting: the one place that includes fmt.

#include <fmt/format.h>

#include <cstdint>
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

// Why `path` could not be written, from the errno of the write (or close)
// that failed: "<path>: no space left on device" for ENOSPC (a full disk says
// where, in the same words for the database, a case log or an output file),
// "<path>: cannot write: <strerror>" otherwise, "<path>: cannot write" for 0.
std::string CannotWrite(const std::string& path, int error);

// One CSV field per RFC 4180: quoted (with "" for \") only when it holds a
// comma, a quote, CR or LF.
std::string CsvField(const std::string& text);

// ---- UTF-8 ------------------------------------------------------------------
// Well-formed UTF-8 is Unicode's Table 3-7 (Unicode 15, §3.9; RFC 3629): no
// overlong forms, no surrogates (U+D800–U+DFFF), nothing above U+10FFFF.

// The well-formed sequence starting at text[i]: returns its length (1–4) and
// stores its code point in *cp; returns 0 when the bytes at i do not start one
// (a lone continuation byte, a truncated or overlong sequence, a surrogate,
// a lead byte C0, C1 or F5–FF). REQUIRES: i < text.size().
size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* cp);

bool IsValidUtf8(std::string_view text);

// `text` made valid UTF-8: unchanged when it is; otherwise every maximal
// subpart of an ill-formed subsequence (the longest prefix of a well-formed
// sequence, or else one byte) becomes one U+FFFD — Unicode §3.9 "U+FFFD
// Substitution of Maximal Subparts", as ICU, the WHATWG Encoding Standard and
// Python's bytes.decode("utf-8", "replace") do. E2 82 41 gives U+FFFD "A";
// ED A0 80 (a surrogate) gives three U+FFFD. Everything stored as SQLite TEXT
// passes through this (store.cc).
std::string ValidUtf8(std::string_view text);

// Rows of cells as aligned text: each column padded to its widest cell (in
// code points), `gap` between columns, trailing spaces dropped, one "\n" per row.
std::string AlignColumns(const std::vector<std::vector<std::string>>& rows, std::string_view gap);

// Edit distance with adjacent transpositions (optimal string alignment).
int EditDistance(std::string_view a, std::string_view b);
// The candidate closest to `word` when it is close enough to be a plausible
// typo (distance <= max(1, len/3)); empty otherwise.
std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates);

// A number for method texts: at most 3 decimals, trailing zeros dropped
// ("12.3", "4", "1.234", "-0.5").
std::string FormatFigure(double value);

// A tensor shape for messages: "[4, 32]" ("[]" for a scalar).
std::string ShapeText(const std::vector<int64_t>& shape);

}  // namespace protocol

#endif  // PROTOCOL_RUNNER_BASE_TEXT_H_
