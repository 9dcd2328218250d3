#include <doctest/doctest.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "runner/base/sha256.h"

using namespace protocol;

// FIPS 180-4 example vectors (NIST "SHA256.pdf" examples and the classic
// one-million-'a' vector from FIPS 180-2 appendix B.3).
TEST_CASE("Sha256Hex matches the FIPS 180 test vectors") {
  CHECK(Sha256Hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(Sha256Hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(Sha256Hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(Sha256Hex(std::string(1000000, 'a')) ==
        "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

// Lengths around the padding boundary (55/56 bytes leave no room for the
// length field; 64 is exactly one block). Expected values from coreutils sha256sum.
TEST_CASE("Sha256Hex is right at the padding boundaries") {
  CHECK(Sha256Hex(std::string(55, 'x')) == "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  CHECK(Sha256Hex(std::string(56, 'x')) == "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
  CHECK(Sha256Hex(std::string(63, 'x')) == "75220b47218278e656f2013bb8f0c455a25eaf01e86c64924e9d48d89776d6f2");
  CHECK(Sha256Hex(std::string(64, 'x')) == "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
  CHECK(Sha256Hex(std::string(65, 'x')) == "9537c5fdf120482f7d58d25e9ed583f52c02b4e304ea814db1633ad565aed7e9");
  CHECK(Sha256Hex(std::string(119, 'x')) == "000b48d4edf0fa7bee3c6236ecd2785baa5db4eeb8bb54341b029e0d9fa5fb0c");
}

TEST_CASE("Sha256 fed in pieces equals one Update") {
  std::string text(1000, 'q');
  for (size_t i = 0; i < text.size(); ++i) text[i] = static_cast<char>('a' + i % 26);
  Sha256 pieces;
  for (size_t i = 0; i < text.size(); i += 37) pieces.Update(std::string_view(text).substr(i, 37));
  CHECK(pieces.HexDigest() == Sha256Hex(text));
}

TEST_CASE("Sha256File hashes a file's bytes and names a missing path") {
  std::string path = (std::filesystem::temp_directory_path() / "protocol_sha256_test.bin").string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fputs("abc", f);
  std::fclose(f);
  auto hex = Sha256File(path);
  REQUIRE(hex.ok());
  CHECK(*hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::remove(path.c_str());

  auto missing = Sha256File("no/such/file.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(missing.status().code() == Status::Code::kNotFound);
  CHECK(missing.status().message() == "no/such/file.yaml: no such file");
}
