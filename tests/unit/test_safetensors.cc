// The safetensors reader against the real fixture, the writer by round trip
// and by a hand-written expected file, and a table of crafted bad files (one
// or more per SafetensorsErrc) that must each be refused with their own kind.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <set>

#include "io/safetensors.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

using Bytes = std::vector<std::byte>;

Bytes to_bytes(std::string_view s) {
  Bytes b(s.size());
  if (!s.empty()) std::memcpy(b.data(), s.data(), s.size());
  return b;
}

// 8-byte little-endian length, then `rest` as given.
std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xFF);
  return s;
}

// A file image: header length, header, data (data given as its size in zero bytes).
std::string st_file(const std::string& header, size_t data_bytes = 0) {
  return le64(header.size()) + header + std::string(data_bytes, '\0');
}

// {"<name>": {"dtype": ..., "shape": ..., "data_offsets": ...}} as JSON text.
std::string entry(const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offsets) {
  return "\"" + name + "\":{\"dtype\":" + dtype + ",\"shape\":" + shape +
         ",\"data_offsets\":" + offsets + "}";
}

SafetensorsErrc errc_of(const std::function<void()>& f, std::string* message = nullptr) {
  try {
    f();
  } catch (const SafetensorsError& e) {
    if (message) *message = e.what();
    return e.kind();
  }
  ADD_FAILURE() << "no SafetensorsError thrown";
  return SafetensorsErrc::io;
}

std::string str(std::span<const std::byte> b) {
  return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// ---- the real fixture ----------------------------------------------------

TEST(SafetensorsRead, TinyBertFixture) {
  auto f = SafetensorsFile::open(test::fixture("golden/tiny-bert.safetensors"));
  ASSERT_NE(f->find("input_ids"), nullptr);
  const StoredTensor& ids = *f->find("input_ids");
  EXPECT_EQ(ids.dtype, DType::i64);
  EXPECT_EQ(ids.shape, (std::vector<int64_t>{66, 128}));
  EXPECT_EQ(ids.numel(), 66 * 128);
  ASSERT_EQ(ids.data.size(), 66u * 128u * 8u);
  std::vector<int64_t> v(ids.numel());
  std::memcpy(v.data(), ids.data.data(), ids.data.size());
  // Every row starts with [CLS] (id 2 in tiny-bert's vocab.txt) and every id
  // is inside the 3000-entry vocabulary.
  for (int r = 0; r < 66; ++r) EXPECT_EQ(v[r * 128], 2) << "row " << r;
  for (int64_t id : v) ASSERT_TRUE(id >= 0 && id < 3000) << id;

  const StoredTensor* mask = f->find("attention_mask");
  ASSERT_NE(mask, nullptr);
  std::vector<int64_t> m(mask->numel());
  std::memcpy(m.data(), mask->data.data(), mask->data.size());
  for (int64_t x : m) ASSERT_TRUE(x == 0 || x == 1);

  const StoredTensor* h = f->find("last_hidden_state");
  ASSERT_NE(h, nullptr);
  EXPECT_EQ(h->dtype, DType::f32);
  EXPECT_EQ(h->shape, (std::vector<int64_t>{66, 128, 64}));
  std::vector<float> hs(h->numel());
  std::memcpy(hs.data(), h->data.data(), h->data.size());
  for (float x : hs) ASSERT_TRUE(std::isfinite(x));

  EXPECT_EQ(f->tensors().size(), 166u);
  EXPECT_EQ(f->metadata().at("format"), "pt");
  EXPECT_EQ(f->find("no such tensor"), nullptr);
  // tensors() is in file-offset order and tiles the data section.
  for (size_t i = 1; i < f->tensors().size(); ++i)
    EXPECT_EQ(f->tensors()[i - 1].data.data() + f->tensors()[i - 1].data.size(),
              f->tensors()[i].data.data());
  EXPECT_EQ(f->file_size(),
            std::filesystem::file_size(test::fixture("golden/tiny-bert.safetensors")));
}

TEST(SafetensorsRead, FromBytesMatchesOpen) {
  auto path = test::fixture("golden/tiny-bert.safetensors");
  std::ifstream in(path, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto a = SafetensorsFile::open(path);
  auto b = SafetensorsFile::from_bytes(to_bytes(all));
  ASSERT_EQ(a->tensors().size(), b->tensors().size());
  for (size_t i = 0; i < a->tensors().size(); ++i) {
    EXPECT_EQ(a->tensors()[i].name, b->tensors()[i].name);
    EXPECT_EQ(str(a->tensors()[i].data), str(b->tensors()[i].data));
  }
}

// ---- valid edge cases ----------------------------------------------------

TEST(SafetensorsRead, AcceptsEdgeCases) {
  // No tensors, no data; header padded with spaces.
  auto f = SafetensorsFile::from_bytes(to_bytes(st_file("{}      ")));
  EXPECT_TRUE(f->tensors().empty());
  // Metadata only.
  f = SafetensorsFile::from_bytes(to_bytes(st_file(R"({"__metadata__":{"a":"b","":""}})")));
  EXPECT_EQ(f->metadata().size(), 2u);
  // A scalar (shape []) holds one element; zero-size tensors share offsets with
  // their neighbours (begin == end), at the start, in the middle and at the end.
  std::string h =
      "{" + entry("s", "\"F32\"", "[]", "[0,4]") + "," + entry("z0", "\"F32\"", "[0]", "[0,0]") +
      "," + entry("z1", "\"I8\"", "[3,0,2]", "[4,4]") + "," +
      entry("z2", "\"I8\"", "[0]", "[4,4]") + "," + entry("b", "\"U8\"", "[2]", "[4,6]") + "," +
      entry("z3", "\"BF16\"", "[0,1]", "[6,6]") + "}";
  f = SafetensorsFile::from_bytes(to_bytes(st_file(h, 6)));
  ASSERT_EQ(f->tensors().size(), 6u);
  EXPECT_EQ(f->find("s")->numel(), 1);
  EXPECT_EQ(f->find("s")->data.size(), 4u);
  EXPECT_EQ(f->find("z1")->numel(), 0);
  EXPECT_EQ(f->find("z1")->shape, (std::vector<int64_t>{3, 0, 2}));
  EXPECT_EQ(f->tensors().front().name, "z0");  // offset order, ties by end then name
  EXPECT_EQ(f->tensors().back().name, "z3");
  // Keys in any order, whitespace anywhere JSON allows it, unicode escapes in names.
  f = SafetensorsFile::from_bytes(
      to_bytes(st_file(" { \"caf\\u00e9\" : { \"data_offsets\" : [ 0 , 2 ] , \"shape\" : [ 1 ] , "
                       "\"dtype\" : \"F16\" } } ",
                       2)));
  EXPECT_NE(f->find("caf\xc3\xa9"), nullptr);
}

// ---- writer --------------------------------------------------------------

TEST(SafetensorsWrite, MatchesTheFormatByHand) {
  // Expected bytes written out from the format description (and what the
  // reference Rust writer emits): compact JSON, metadata first, tensors sorted
  // by name, header padded with spaces to a multiple of 8.
  const float b[2] = {1.0f, 2.0f};
  const uint8_t a[1] = {7};
  std::vector<TensorToWrite> ts = {
      {"b", DType::f32, {2}, std::as_bytes(std::span(b))},
      {"a", DType::u8, {1}, std::as_bytes(std::span(a))},
  };
  Bytes out = serialize_safetensors(ts, {{"format", "pt"}});
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
      R"("b":{"dtype":"F32","shape":[2],"data_offsets":[1,9]}})";
  while (header.size() % 8) header += ' ';
  std::string expected =
      le64(header.size()) + header + "\x07" + std::string(reinterpret_cast<const char*>(b), 8);
  EXPECT_EQ(str(out), expected);
}

TEST(SafetensorsWrite, RoundTripEveryDtype) {
  const DType all[] = {DType::f64, DType::f32, DType::f16, DType::bf16, DType::i64,
                       DType::i32, DType::i16, DType::i8,  DType::u8,   DType::boolean};
  const std::vector<std::vector<int64_t>> shapes = {{},        {1}, {3},      {2, 3},
                                                    {2, 0, 4}, {0}, {1, 1, 5}};
  std::vector<Bytes> storage;
  std::vector<TensorToWrite> ts;
  uint32_t seed = 12345;
  for (DType t : all) {
    for (size_t s = 0; s < shapes.size(); ++s) {
      size_t n = 1;
      for (int64_t d : shapes[s]) n *= static_cast<size_t>(d);
      Bytes data(n * dtype_size(t));
      for (auto& x : data) {
        seed = seed * 1664525u + 1013904223u;
        x = static_cast<std::byte>(t == DType::boolean ? (seed >> 31) : (seed >> 24));
      }
      storage.push_back(std::move(data));
      ts.push_back(
          {std::string(dtype_name(t)) + ".t" + std::to_string(s), t, shapes[s], storage.back()});
    }
  }
  std::map<std::string, std::string> meta = {{"format", "pt"},
                                             {"note", "caf\xc3\xa9 \"quoted\"\n"}};
  auto dir = test::scratch_dir("safetensors_roundtrip");
  write_safetensors(dir / "m.safetensors", ts, meta);
  Bytes bytes = serialize_safetensors(ts, meta);

  for (auto f :
       {SafetensorsFile::open(dir / "m.safetensors"), SafetensorsFile::from_bytes(bytes)}) {
    EXPECT_EQ(f->file_size(), bytes.size());
    EXPECT_EQ(f->metadata(), meta);
    ASSERT_EQ(f->tensors().size(), ts.size());
    for (const auto& t : ts) {
      const StoredTensor* v = f->find(t.name);
      ASSERT_NE(v, nullptr) << t.name;
      EXPECT_EQ(v->dtype, t.dtype) << t.name;
      EXPECT_EQ(v->shape, t.shape) << t.name;
      EXPECT_EQ(str(v->data), str(t.data)) << t.name;
      int64_t n = 1;
      for (int64_t d : t.shape) n *= d;
      EXPECT_EQ(v->numel(), n) << t.name;
    }
  }
  // Header length is a multiple of 8, so the data section is 8-byte aligned.
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<uint8_t>(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  // Serialising the read-back tensors reproduces the file byte for byte.
  auto f = SafetensorsFile::from_bytes(bytes);
  std::vector<TensorToWrite> again;
  for (const auto& v : f->tensors()) again.push_back({v.name, v.dtype, v.shape, v.data});
  EXPECT_EQ(serialize_safetensors(again, f->metadata()), bytes);
}

TEST(SafetensorsWrite, RefusesBadInput) {
  const float x[3] = {};
  auto code = [](const std::vector<TensorToWrite>& ts) -> std::optional<Errc> {
    try {
      serialize_safetensors(ts);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("safetensors writer"), std::string::npos);
      return e.code();
    }
    return std::nullopt;
  };
  auto b = std::as_bytes(std::span(x));
  EXPECT_EQ(code({{"a", DType::f32, {2, 2}, b}}), Errc::invalid_argument);  // 12 bytes, needs 16
  EXPECT_EQ(code({{"a", DType::f32, {-3}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{"", DType::f32, {3}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{"a", DType::f32, {3}, b}, {"a", DType::f32, {3}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{std::string("a\0b", 3), DType::f32, {3}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{"\xff", DType::f32, {3}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{"__metadata__", DType::f32, {3}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{"a", DType::u8, {int64_t{1} << 62, 8}, b}}), Errc::invalid_argument);
  EXPECT_EQ(code({{"a", DType::f32, {3}, b}}), std::nullopt);
}

// ---- bad files -----------------------------------------------------------

struct BadFile {
  const char* name;
  std::string bytes;
  SafetensorsErrc kind;
  const char* needle;  // the message must name this (a tensor, a value, a key)
};

std::string obj(const std::string& body) { return "{" + body + "}"; }

std::vector<BadFile> bad_files() {
  const std::string ok_a = entry("a", "\"F32\"", "[2]", "[0,8]");
  return {
      {"empty file", "", SafetensorsErrc::header_too_short, "0 bytes"},
      {"seven bytes", std::string(7, '\0'), SafetensorsErrc::header_too_short, "7 bytes"},
      {"header over 100 MB", le64(100'000'001) + "{}", SafetensorsErrc::header_too_large,
       "100000001"},
      {"header length 2^64-1", le64(~uint64_t{0}) + "{}", SafetensorsErrc::header_too_large,
       "18446744073709551615"},
      {"header length 0", le64(0), SafetensorsErrc::header_not_json, "not JSON"},
      {"header length = file size", le64(10) + "{}", SafetensorsErrc::header_out_of_bounds, "10"},
      {"header length one past end", le64(3) + "{}", SafetensorsErrc::header_out_of_bounds, "3"},
      {"invalid UTF-8 byte", st_file("{\"a\xff\":1}"), SafetensorsErrc::header_not_utf8, "UTF-8"},
      {"overlong UTF-8", st_file("{\"\xc0\xaf\":1}"), SafetensorsErrc::header_not_utf8, "UTF-8"},
      {"UTF-8 surrogate D800", st_file("{\"\xed\xa0\x80\":1}"), SafetensorsErrc::header_not_utf8,
       "UTF-8"},
      {"truncated JSON", st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8])", 8),
       SafetensorsErrc::header_not_json, "not JSON"},
      {"not JSON at all", st_file("hello"), SafetensorsErrc::header_not_json, "not JSON"},
      {"garbage after the object", st_file("{} x"), SafetensorsErrc::header_not_json, "not JSON"},
      {"NUL padding", st_file(std::string("{}\0\0", 4)), SafetensorsErrc::header_not_json,
       "not JSON"},
      {"NUL then more JSON", st_file(std::string("{}\0{\"a\":1}", 11)),
       SafetensorsErrc::header_not_json, "NUL byte at header offset 2"},
      {"raw NUL inside a name", st_file(std::string("{\"a\0\":1}", 8)),
       SafetensorsErrc::header_not_json, "NUL"},
      {"lone surrogate escape", st_file(R"({"\ud800":1})"), SafetensorsErrc::header_not_json,
       "not JSON"},
      {"semantic error then syntax error", st_file(R"({"a":5,)"), SafetensorsErrc::header_not_json,
       "not JSON"},
      {"header is an array", st_file("[]"), SafetensorsErrc::header_not_object, "an array"},
      {"header is a string", st_file("\"x\""), SafetensorsErrc::header_not_object, "\"x\""},
      {"header is null", st_file("null"), SafetensorsErrc::header_not_object, "null"},
      {"metadata with a number value", st_file(R"({"__metadata__":{"k":1}})"),
       SafetensorsErrc::metadata_not_string_map, "\"k\""},
      {"metadata is an array", st_file(R"({"__metadata__":["a"]})"),
       SafetensorsErrc::metadata_not_string_map, "an array"},
      {"metadata nested object", st_file(R"({"__metadata__":{"k":{}}})"),
       SafetensorsErrc::metadata_not_string_map, "an object"},
      {"metadata is a string", st_file(R"({"__metadata__":"pt"})"),
       SafetensorsErrc::metadata_not_string_map, "\"pt\""},
      {"entry is a number", st_file(R"({"a":5})"), SafetensorsErrc::entry_not_object, "\"a\""},
      {"entry is an array", st_file(R"({"w":[0,8]})"), SafetensorsErrc::entry_not_object, "\"w\""},
      {"entry with an unknown key",
       st_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}})", 8),
       SafetensorsErrc::entry_not_object, "\"extra\""},
      {"missing data_offsets", st_file(R"({"a":{"dtype":"F32","shape":[2]}})", 8),
       SafetensorsErrc::missing_field, "data_offsets"},
      {"missing dtype", st_file(R"({"a":{"shape":[2],"data_offsets":[0,8]}})", 8),
       SafetensorsErrc::missing_field, "dtype"},
      {"empty entry", st_file(R"({"a":{}})"), SafetensorsErrc::missing_field,
       "dtype, shape, data_offsets"},
      {"dtype 123", st_file(obj(entry("a", "123", "[2]", "[0,8]")), 8),
       SafetensorsErrc::bad_dtype_field, "123"},
      {"dtype null", st_file(obj(entry("a", "null", "[2]", "[0,8]")), 8),
       SafetensorsErrc::bad_dtype_field, "null"},
      {"dtype F8_E4M3 (not supported)", st_file(obj(entry("a", "\"F8_E4M3\"", "[2]", "[0,2]")), 2),
       SafetensorsErrc::unknown_dtype, "F8_E4M3"},
      {"dtype lower case", st_file(obj(entry("a", "\"f32\"", "[2]", "[0,8]")), 8),
       SafetensorsErrc::unknown_dtype, "\"f32\""},
      {"negative dim", st_file(obj(entry("a", "\"F32\"", "[-2]", "[0,8]")), 8),
       SafetensorsErrc::bad_shape, "-2"},
      {"float dim", st_file(obj(entry("a", "\"F32\"", "[2.0]", "[0,8]")), 8),
       SafetensorsErrc::bad_shape, "2.0"},
      {"dim as a string", st_file(obj(entry("a", "\"F32\"", "[\"2\"]", "[0,8]")), 8),
       SafetensorsErrc::bad_shape, "\"2\""},
      {"nested shape", st_file(obj(entry("a", "\"F32\"", "[[2]]", "[0,8]")), 8),
       SafetensorsErrc::bad_shape, "an array"},
      {"shape is a number", st_file(obj(entry("a", "\"F32\"", "2", "[0,8]")), 8),
       SafetensorsErrc::bad_shape, "shape is 2"},
      {"dim over 2^64", st_file(obj(entry("a", "\"U8\"", "[18446744073709551616]", "[0,8]")), 8),
       SafetensorsErrc::bad_shape, "18446744073709551616"},
      {"huge dims", st_file(obj(entry("a", "\"F32\"", "[4294967296,4294967296,16]", "[0,8]")), 8),
       SafetensorsErrc::shape_overflow, "[4294967296, 4294967296, 16]"},
      {"dims x dtype size overflow",
       st_file(obj(entry("a", "\"F64\"", "[2305843009213693952]", "[0,8]")), 8),
       SafetensorsErrc::shape_overflow, "F64"},
      {"huge dims around a zero",
       st_file(obj(entry("a", "\"F32\"", "[0,4294967296,4294967296]", "[0,0]"))),
       SafetensorsErrc::shape_overflow, "\"a\""},
      {"dim 2^63", st_file(obj(entry("a", "\"U8\"", "[9223372036854775808]", "[0,8]")), 8),
       SafetensorsErrc::shape_overflow, "9223372036854775808"},
      {"one offset", st_file(obj(entry("a", "\"F32\"", "[2]", "[8]")), 8),
       SafetensorsErrc::bad_offsets, "1 values"},
      {"three offsets", st_file(obj(entry("a", "\"F32\"", "[2]", "[0,8,8]")), 8),
       SafetensorsErrc::bad_offsets, "more than two"},
      {"negative offset", st_file(obj(entry("a", "\"F32\"", "[2]", "[-8,0]")), 8),
       SafetensorsErrc::bad_offsets, "-8"},
      {"offsets as strings", st_file(obj(entry("a", "\"F32\"", "[2]", "[\"0\",\"8\"]")), 8),
       SafetensorsErrc::bad_offsets, "\"0\""},
      {"offsets an object", st_file(obj(entry("a", "\"F32\"", "[2]", "{}")), 8),
       SafetensorsErrc::bad_offsets, "an object"},
      {"offsets reversed", st_file(obj(entry("a", "\"F32\"", "[1]", "[8,4]")), 8),
       SafetensorsErrc::offsets_reversed, "[8, 4]"},
      {"offsets past the end", st_file(obj(entry("a", "\"F32\"", "[2]", "[0,8]")), 7),
       SafetensorsErrc::offsets_out_of_range, "7 bytes"},
      {"offsets at 2^64-1",
       st_file(obj(entry("a", "\"F32\"", "[0]", "[18446744073709551615,18446744073709551615]"))),
       SafetensorsErrc::offsets_out_of_range, "\"a\""},
      {"size mismatch", st_file(obj(entry("a.weight", "\"F32\"", "[2,2]", "[0,12]")), 12),
       SafetensorsErrc::size_mismatch, "hold 12 bytes but shape [2, 2] of F32 needs 16"},
      {"scalar with no bytes", st_file(obj(entry("s", "\"F32\"", "[]", "[0,0]"))),
       SafetensorsErrc::size_mismatch, "needs 4"},
      {"overlap of two tensors",
       st_file(obj(entry("a", "\"F32\"", "[2]", "[0,8]") + "," +
                   entry("b", "\"F32\"", "[2]", "[4,12]")),
               12),
       SafetensorsErrc::offsets_overlap, "\"b\""},
      {"two tensors, same bytes",
       st_file(
           obj(entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("b", "\"I32\"", "[2]", "[0,8]")),
           8),
       SafetensorsErrc::offsets_overlap, "\"a\""},
      {"zero-size tensor inside another",
       st_file(
           obj(entry("a", "\"F32\"", "[2]", "[0,8]") + "," + entry("z", "\"F32\"", "[0]", "[4,4]")),
           8),
       SafetensorsErrc::offsets_overlap, "\"z\""},
      {"hole at start", st_file(obj(entry("a", "\"F32\"", "[2]", "[4,12]")), 12),
       SafetensorsErrc::data_hole, "[0, 4]"},
      {"hole in the middle",
       st_file(obj(entry("a", "\"F32\"", "[2]", "[0,8]") + "," +
                   entry("b", "\"F32\"", "[1]", "[12,16]")),
               16),
       SafetensorsErrc::data_hole, "[8, 12]"},
      {"trailing bytes", st_file(obj(ok_a), 9), SafetensorsErrc::trailing_bytes, "1 bytes"},
      {"no tensors but data", st_file("{}", 4), SafetensorsErrc::trailing_bytes, "4 bytes"},
      {"duplicate tensor names", st_file(obj(ok_a + "," + ok_a), 8),
       SafetensorsErrc::duplicate_name, "\"a\""},
      {"duplicate key inside an entry",
       st_file(R"({"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 8),
       SafetensorsErrc::duplicate_name, "\"dtype\""},
      {"duplicate metadata key", st_file(R"({"__metadata__":{"k":"1","k":"2"}})"),
       SafetensorsErrc::duplicate_name, "\"k\""},
      {"__metadata__ twice", st_file(R"({"__metadata__":{},"__metadata__":{}})"),
       SafetensorsErrc::duplicate_name, "__metadata__"},
      {"duplicate names spelled differently",
       st_file(obj(ok_a + "," + entry("\\u0061", "\"F32\"", "[2]", "[0,8]")), 8),
       SafetensorsErrc::duplicate_name, "\"a\""},
      {"NUL in a name", st_file(obj(entry("a\\u0000b", "\"F32\"", "[2]", "[0,8]")), 8),
       SafetensorsErrc::nul_in_name, "a\\u0000b"},
      {"empty name", st_file(obj(entry("", "\"F32\"", "[2]", "[0,8]")), 8),
       SafetensorsErrc::empty_name, "\"\""},
  };
}

TEST(SafetensorsRead, RefusesBadFiles) {
  for (const BadFile& bad : bad_files()) {
    std::string message;
    SafetensorsErrc kind = errc_of(
        [&] { SafetensorsFile::from_bytes(to_bytes(bad.bytes), "bad.safetensors"); }, &message);
    EXPECT_EQ(safetensors_errc_name(kind), std::string(safetensors_errc_name(bad.kind)))
        << bad.name << ": " << message;
    EXPECT_EQ(message.rfind("bad.safetensors: ", 0), 0u) << bad.name << ": " << message;
    EXPECT_NE(message.find(bad.needle), std::string::npos)
        << bad.name << ": message does not mention " << bad.needle << ": " << message;
  }
}

TEST(SafetensorsRead, TableCoversEveryKind) {
  std::set<SafetensorsErrc> covered;
  for (const BadFile& bad : bad_files()) covered.insert(bad.kind);
  for (int k = 0; k < static_cast<int>(SafetensorsErrc::io); ++k)
    EXPECT_TRUE(covered.count(static_cast<SafetensorsErrc>(k)))
        << safetensors_errc_name(static_cast<SafetensorsErrc>(k)) << " has no bad file";
  EXPECT_GE(bad_files().size(), 30u);
}

TEST(SafetensorsRead, ErrcNames) {
  EXPECT_STREQ(safetensors_errc_name(SafetensorsErrc::duplicate_name), "duplicate_name");
  EXPECT_STREQ(safetensors_errc_name(SafetensorsErrc::header_too_short), "header_too_short");
  EXPECT_STREQ(safetensors_errc_name(SafetensorsErrc::io), "io");
  // The broad code lets the CLI tell a broken file from a failing disk.
  EXPECT_EQ(SafetensorsError(SafetensorsErrc::io, "x").code(), Errc::io);
  EXPECT_EQ(SafetensorsError(SafetensorsErrc::bad_shape, "x").code(), Errc::format);
}

// The same files through open(): the mmap path, including lengths 0 and 7
// (no mapping may be attempted) and files on disk with real offsets.
TEST(SafetensorsRead, RefusesBadFilesOnDisk) {
  auto dir = test::scratch_dir("safetensors_bad");
  int i = 0;
  for (const BadFile& bad : bad_files()) {
    auto path = dir / ("bad" + std::to_string(i++) + ".safetensors");
    std::ofstream(path, std::ios::binary) << bad.bytes;
    std::string message;
    SafetensorsErrc kind = errc_of([&] { SafetensorsFile::open(path); }, &message);
    EXPECT_EQ(kind, bad.kind) << bad.name << ": " << message;
    EXPECT_EQ(message.rfind(path.string() + ": ", 0), 0u) << bad.name << ": " << message;
  }
}

TEST(SafetensorsRead, IoErrors) {
  auto dir = test::scratch_dir("safetensors_io");
  std::string message;
  EXPECT_EQ(errc_of([&] { SafetensorsFile::open(dir / "missing.safetensors"); }, &message),
            SafetensorsErrc::io);
  EXPECT_NE(message.find("missing.safetensors"), std::string::npos) << message;
  EXPECT_EQ(errc_of([&] { SafetensorsFile::open(dir); }, &message), SafetensorsErrc::io);
  EXPECT_NE(message.find("not a regular file"), std::string::npos) << message;
}

// Errors report values from the file but never at length.
TEST(SafetensorsRead, MessagesStayShort) {
  std::string name(100000, 'x');
  std::string message;
  errc_of(
      [&] {
        SafetensorsFile::from_bytes(
            to_bytes(st_file(obj(entry(name, "\"F8\"", "[1]", "[0,1]")), 1)));
      },
      &message);
  EXPECT_LT(message.size(), 600u) << message.size();
  EXPECT_NE(message.find("100000 bytes"), std::string::npos);
  errc_of([&] { SafetensorsFile::from_bytes(to_bytes(st_file("[\"" + name))); }, &message);
  EXPECT_LT(message.size(), 600u) << message.size();
}

// A deeply nested header is scanned without recursion and without a DOM.
TEST(SafetensorsRead, DeepNestingIsRefusedNotACrash) {
  std::string deep = R"({"a":)" + std::string(200000, '[') + std::string(200000, ']') + "}";
  EXPECT_EQ(errc_of([&] { SafetensorsFile::from_bytes(to_bytes(st_file(deep))); }),
            SafetensorsErrc::entry_not_object);
  std::string open_only = std::string(200000, '[');
  EXPECT_EQ(errc_of([&] { SafetensorsFile::from_bytes(to_bytes(st_file(open_only))); }),
            SafetensorsErrc::header_not_json);
}

}  // namespace
}  // namespace stoke
