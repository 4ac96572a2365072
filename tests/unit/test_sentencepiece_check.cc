// SentencePiece model files are checked before libsentencepiece parses them:
// the library aborts (or reads out of bounds) on some malformed models.
#include <gtest/gtest.h>

#include <cstring>

#include "core/error.h"
#include "core/file_util.h"
#include "support/fixtures.h"
#include "text/sentencepiece_check.h"
#include "text/sentencepiece_model.h"

namespace stoke {
namespace {

// Protobuf wire-format helpers to craft models.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_bytes(std::string& out, uint32_t field, std::string_view bytes) {
  put_varint(out, (field << 3) | 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}
std::string piece(std::string_view text, uint64_t type = 1) {
  std::string p;
  put_bytes(p, 1, text);
  put_varint(p, (2 << 3) | 5);  // score: float
  p.append("\0\0\0\0", 4);
  put_varint(p, (3 << 3) | 0);
  put_varint(p, type);
  return p;
}
std::string model_of(const std::vector<std::string>& pieces, std::string_view charsmap = {}) {
  std::string m;
  for (const auto& p : pieces) put_bytes(m, 1, p);
  if (!charsmap.empty()) {
    std::string spec;
    put_bytes(spec, 1, "custom");
    put_bytes(spec, 2, charsmap);
    put_bytes(m, 3, spec);
  }
  return m;
}
std::string charsmap(uint32_t trie_bytes, const std::vector<uint32_t>& units, std::string_view pool) {
  std::string blob(4, '\0');
  std::memcpy(blob.data(), &trie_bytes, 4);
  for (uint32_t u : units) blob.append(reinterpret_cast<const char*>(&u), 4);
  blob.append(pool);
  return blob;
}

std::string expect_refused(const std::string& bytes) {
  try {
    check_sentencepiece_model(bytes, "crafted.model");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    EXPECT_NE(std::string(e.what()).find("crafted.model"), std::string::npos) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "accepted";
  return "";
}

TEST(SentencePieceCheck, RealModelsPass) {
  EXPECT_NO_THROW(check_sentencepiece_model(read_file(test::fixture("models/tiny-xlmr/sentencepiece.bpe.model")), "x"));
  EXPECT_NO_THROW(check_sentencepiece_model(
      read_file(std::string(STOKE_SOURCE_DIR) + "/tests/fuzz/corpus/sentencepiece/tiny-unigram.model"), "x"));
  EXPECT_NO_THROW(check_sentencepiece_model(model_of({piece("<unk>", 2), piece("a"), piece("\xE2\x96\x81")}), "x"));
}

TEST(SentencePieceCheck, RefusesWhatTheLibraryWouldCrashOn) {
  EXPECT_NE(expect_refused(model_of({piece("<unk>", 2), piece("")})).find("empty"), std::string::npos);
  EXPECT_NE(expect_refused(model_of({piece("<unk>", 2), piece("a"), piece("a")})).find("twice"), std::string::npos);
  EXPECT_NE(expect_refused(model_of({piece("\xFF\xFE")})).find("UTF-8"), std::string::npos);
  EXPECT_NE(expect_refused(model_of({piece("a", 9)})).find("type"), std::string::npos);
  EXPECT_NE(expect_refused(model_of({piece("<unk>", 2), piece(std::string("\0\0s", 3))})).find("NUL"),
            std::string::npos);
  EXPECT_NE(expect_refused(model_of({})).find("no pieces"), std::string::npos);
  expect_refused(std::string("\x0a\xff\xff\xff\xff\x0f", 6));  // length past the end
  expect_refused(std::string("\x0a", 1));                      // truncated varint
  expect_refused(std::string("\x0b\x00", 2));                  // group wire type
  expect_refused("garbage that is not a protobuf at all");
  // Normalization tables: a trie size that does not fit, strings without a
  // terminating NUL, a link or a leaf outside the table.
  const std::vector<std::string> pieces = {piece("<unk>", 2), piece("a")};
  std::vector<uint32_t> ok_units(256, 0);
  EXPECT_NO_THROW(check_sentencepiece_model(model_of(pieces, charsmap(256 * 4, ok_units, std::string("x\0", 2))), "x"));
  expect_refused(model_of(pieces, charsmap(1 << 20, ok_units, std::string("x\0", 2))));
  expect_refused(model_of(pieces, charsmap(256 * 4, ok_units, "xyz")));
  std::vector<uint32_t> far = ok_units;
  far[0] = 1000u << 10;  // offset 1000: block [1000^0 .. 1000|255] is past 256 units
  expect_refused(model_of(pieces, charsmap(256 * 4, far, std::string("x\0", 2))));
  std::vector<uint32_t> leaf = ok_units;
  leaf[5] = (1u << 31) | 77;  // leaf value past the 2-byte string pool
  expect_refused(model_of(pieces, charsmap(256 * 4, leaf, std::string("x\0", 2))));
}

TEST(SentencePieceCheck, FuzzerRegressionsAreRefusedNotFatal) {
  const std::string dir = std::string(STOKE_SOURCE_DIR) + "/tests/fuzz/corpus/sentencepiece/";
  for (const char* name : {"regression-bad-piece.model", "regression-nul-piece.model"})
    EXPECT_THROW(SentencePieceModel::from_bytes(read_file(dir + name), "r"), Error) << name;
  // One piece: the fairseq <unk> (3) would lie past its vocabulary of 3.
  try {
    SentencePieceModel::from_bytes(read_file(dir + "regression-one-piece.model"), "r");
    ADD_FAILURE() << "a one-piece model loaded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("an XLM-R style model has at least <unk>, <s> and </s>"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace stoke
