#include <doctest/doctest.h>

#include <cerrno>

#include "runner/base/text.h"

using namespace protocol;

TEST_CASE("DidYouMean suggests close names and nothing for unrelated ones") {
  std::vector<std::string> backends = {"fsdp", "share", "command"};
  CHECK(DidYouMean("fdsp", backends) == "fsdp");
  CHECK(DidYouMean("shar", backends) == "share");
  CHECK(DidYouMean("commnad", backends) == "command");
  CHECK(DidYouMean("banana", backends) == "");
}

TEST_CASE("EditDistance counts an adjacent swap as one edit") {
  CHECK(EditDistance("fdsp", "fsdp") == 1);
  CHECK(EditDistance("", "abc") == 3);
  CHECK(EditDistance("kitten", "sitting") == 3);
  CHECK(EditDistance("same", "same") == 0);
}

TEST_CASE("Split keeps empty fields and Join inverts it") {
  auto parts = Split("a,,b", ',');
  REQUIRE(parts.size() == 3);
  CHECK(parts[1] == "");
  CHECK(Join(parts, ",") == "a,,b");
  CHECK(Trim("  x y \n") == "x y");
}

// ---- UTF-8 ------------------------------------------------------------------

namespace {
const std::string kR = "\xEF\xBF\xBD";  // U+FFFD
}

TEST_CASE("ValidUtf8 keeps well-formed text byte for byte") {
  for (const std::string& s : {std::string(""), std::string("plain ascii"), std::string("caf\xC3\xA9"),
                               std::string("\xE2\x82\xAC 20"), std::string("\xF0\x9F\x98\x80"),
                               std::string("\xED\x9F\xBF"),        // U+D7FF, just below the surrogates
                               std::string("\xEE\x80\x80"),        // U+E000, just above
                               std::string("\xF4\x8F\xBF\xBF"),    // U+10FFFF, the last code point
                               std::string("nul \0 inside", 12)}) {
    CAPTURE(s);
    CHECK(IsValidUtf8(s));
    CHECK(ValidUtf8(s) == s);
  }
}

TEST_CASE("ValidUtf8 replaces each maximal invalid subpart with one U+FFFD") {
  struct Row {
    const char* what;
    std::string in, out;
  };
  const Row rows[] = {
      // Unicode 15 §3.9, Table 3-8: the standard's own example.
      {"table 3-8", "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64",
       "a" + kR + kR + kR + "b" + kR + "c" + kR + kR + "d"},
      {"lone continuation byte", "a\x80" "b", "a" + kR + "b"},
      {"two lone continuation bytes", "\x80\xBF", kR + kR},
      {"truncated 3-byte sequence", "\xE2\x82" "A", kR + "A"},
      {"truncated 4-byte sequence at the end", "x\xF0\x9F\x98", "x" + kR},
      {"lead byte at the end", "x\xC3", "x" + kR},
      {"overlong 2-byte NUL", "\xC0\x80", kR + kR},
      {"overlong 3-byte '/'", "\xE0\x80\xAF", kR + kR + kR},
      {"overlong 4-byte", "\xF0\x80\x80\x80", kR + kR + kR + kR},
      {"surrogate U+D800", "\xED\xA0\x80", kR + kR + kR},
      {"surrogate U+DFFF", "\xED\xBF\xBF", kR + kR + kR},
      {"above U+10FFFF", "\xF4\x90\x80\x80", kR + kR + kR + kR},
      {"bytes never in UTF-8", "\xFE\xFF", kR + kR},
      {"old 5-byte form", "\xF8\x88\x80\x80\x80", kR + kR + kR + kR + kR},
      {"valid after invalid", "\xE2\x82\xE2\x82\xAC", kR + "\xE2\x82\xAC"},
  };
  for (const Row& r : rows) {
    CAPTURE(r.what);
    CHECK_FALSE(IsValidUtf8(r.in));
    CHECK(ValidUtf8(r.in) == r.out);
    CHECK(IsValidUtf8(ValidUtf8(r.in)));
  }
}

TEST_CASE("DecodeUtf8 gives the code point and length of a well-formed sequence, 0 otherwise") {
  uint32_t cp = 0;
  CHECK(DecodeUtf8("A", 0, &cp) == 1);
  CHECK(cp == 0x41);
  CHECK(DecodeUtf8("\xC3\xA9", 0, &cp) == 2);
  CHECK(cp == 0xE9);
  CHECK(DecodeUtf8("\xE2\x82\xAC", 0, &cp) == 3);
  CHECK(cp == 0x20AC);
  CHECK(DecodeUtf8("\xF4\x8F\xBF\xBF", 0, &cp) == 4);
  CHECK(cp == 0x10FFFF);
  CHECK(DecodeUtf8("\xE2\x82", 0, &cp) == 0);
  CHECK(DecodeUtf8("\xED\xA0\x80", 0, &cp) == 0);
  CHECK(DecodeUtf8("\xC1\xBF", 0, &cp) == 0);
  CHECK(DecodeUtf8("a\x80", 1, &cp) == 0);
}

TEST_CASE("CannotWrite says 'no space left on device' for a full disk, the system's reason otherwise") {
  CHECK(CannotWrite("q.db", ENOSPC) == "q.db: no space left on device");
  CHECK(CannotWrite("out/m.safetensors", EACCES) == "out/m.safetensors: cannot write: Permission denied");
  CHECK(CannotWrite("x", 0) == "x: cannot write");
}
