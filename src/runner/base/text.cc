#include "runner/base/text.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace protocol {

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::vector<std::string> Split(std::string_view text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t pos = text.find(sep, start);
    out.emplace_back(text.substr(start, pos == std::string_view::npos ? std::string_view::npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return out;
}

std::string Trim(std::string_view text) {
  const char* ws = " \t\r\n";
  size_t b = text.find_first_not_of(ws);
  if (b == std::string_view::npos) return "";
  size_t e = text.find_last_not_of(ws);
  return std::string(text.substr(b, e - b + 1));
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

bool EndsWith(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

std::string CannotWrite(const std::string& path, int error) {
  if (error == ENOSPC) return path + ": no space left on device";
  if (error == 0) return path + ": cannot write";
  return path + ": cannot write: " + std::strerror(error);
}

Result<std::string> ReadFileText(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  auto failure = [](int err) {
    return err == ENOENT ? Status::NotFound(std::strerror(err)) : Status::IoError(std::strerror(err));
  };
  if (fd < 0) return failure(errno);
  std::string text;
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof buffer);
    if (got < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return failure(err);
    }
    if (got == 0) break;
    text.append(buffer, static_cast<size_t>(got));
  }
  ::close(fd);
  return text;
}

std::string CsvField(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (char c : text) {
    if (c == '"') out += '"';
    out += c;
  }
  return out + "\"";
}

namespace {

// Table 3-7 of the Unicode standard: for a lead byte, the sequence length and
// the allowed range of the second byte (the others are 80..BF). Length 0: the
// byte starts no well-formed sequence.
struct Utf8Lead {
  size_t length;
  unsigned char low, high;  // second byte
};
Utf8Lead LeadOf(unsigned char c) {
  if (c < 0x80) return {1, 0, 0};
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};
  if (c == 0xED) return {3, 0x80, 0x9F};
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};
}

// How many bytes from text[i] on follow Table 3-7: the whole sequence when it
// is well-formed (*complete = true), else the maximal subpart (at least 1).
size_t ScanUtf8(std::string_view text, size_t i, bool* complete) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  const Utf8Lead lead = LeadOf(byte(i));
  *complete = false;
  if (lead.length == 0) return 1;
  size_t n = 1;
  while (n < lead.length && i + n < text.size()) {
    const unsigned char c = byte(i + n);
    const bool ok = n == 1 ? (c >= lead.low && c <= lead.high) : (c >= 0x80 && c <= 0xBF);
    if (!ok) break;
    ++n;
  }
  *complete = n == lead.length;
  return n;
}

}  // namespace

size_t DecodeUtf8(std::string_view text, size_t i, uint32_t* cp) {
  bool complete = false;
  const size_t n = ScanUtf8(text, i, &complete);
  if (!complete) return 0;
  const auto c = static_cast<unsigned char>(text[i]);
  uint32_t v = n == 1 ? c : c & (0x7Fu >> n);
  for (size_t k = 1; k < n; ++k) v = (v << 6) | (static_cast<unsigned char>(text[i + k]) & 0x3Fu);
  *cp = v;
  return n;
}

bool IsValidUtf8(std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    bool complete = false;
    i += ScanUtf8(text, i, &complete);
    if (!complete) return false;
  }
  return true;
}

std::string ValidUtf8(std::string_view text) {
  if (IsValidUtf8(text)) return std::string(text);
  std::string out;
  out.reserve(text.size() + 8);
  for (size_t i = 0; i < text.size();) {
    bool complete = false;
    const size_t n = ScanUtf8(text, i, &complete);
    if (complete) out.append(text.substr(i, n));
    else out += "\xEF\xBF\xBD";  // U+FFFD
    i += n;
  }
  return out;
}

int EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment: insert, delete, substitute, or swap two
  // adjacent characters, each costs 1 ("fdsp" -> "fsdp" is 1).
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<int>> d(n + 1, std::vector<int>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = static_cast<int>(i);
  for (size_t j = 0; j <= m; ++j) d[0][j] = static_cast<int>(j);
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      int cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

std::string DidYouMean(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  int best_distance = 1 << 30;
  for (const auto& c : candidates) {
    int d = EditDistance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  int limit = std::max<int>(1, static_cast<int>(word.size()) / 3);
  return best_distance <= limit ? best : std::string();
}

std::string AlignColumns(const std::vector<std::vector<std::string>>& rows, std::string_view gap) {
  auto width = [](const std::string& s) {
    size_t n = 0;
    for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;
    return n;
  };
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (widths.size() < row.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], width(row[i]));
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      line += row[i];
      if (i + 1 < row.size()) line += std::string(widths[i] - width(row[i]), ' ') + std::string(gap);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string FormatFigure(double value) {
  std::string s = fmt::format("{:.3f}", value);
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  if (s == "-0") s = "0";
  return s;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::vector<std::string> dims;
  for (int64_t d : shape) dims.push_back(std::to_string(d));
  return "[" + Join(dims, ", ") + "]";
}

}  // namespace protocol
