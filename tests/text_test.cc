#include <doctest/doctest.h>

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
