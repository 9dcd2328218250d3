#include <doctest/doctest.h>

#include "runner/base/placeholders.h"

using namespace protocol;

TEST_CASE("ExpandPlaceholders substitutes known names and keeps the rest") {
  PlaceholderValues v = {{"case_id", "2.1.1.1"}, {"steps", "1000"}};
  CHECK(ExpandPlaceholders("out/{case_id}/s{steps}", v) == "out/2.1.1.1/s1000");
  CHECK(ExpandPlaceholders("{unknown} {{literal}} {case_id}", v) == "{unknown} {literal} 2.1.1.1");
  CHECK(ExpandPlaceholders("{not a name}", v) == "{not a name}");
}

TEST_CASE("A substituted value is inserted verbatim, never re-expanded") {
  PlaceholderValues v = {{"prompt", "{steps}; rm -rf /"}, {"steps", "9"}};
  CHECK(ExpandPlaceholders("{prompt}", v) == "{steps}; rm -rf /");
}

TEST_CASE("UnknownPlaceholders lists each unknown name once, in order") {
  auto unknown = UnknownPlaceholders("{a}{model_path}{b}{a}{{c}}", {"model_path"});
  REQUIRE(unknown.size() == 2);
  CHECK(unknown[0] == "a");
  CHECK(unknown[1] == "b");
}

TEST_CASE("ShellQuote survives single quotes") {
  CHECK(ShellQuote("it's") == "'it'\\''s'");
  CHECK(ShellQuote("") == "''");
}
