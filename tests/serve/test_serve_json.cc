// The server's JSON pieces in-process: shortest round-trip floats, base64 of
// little-endian f32 (OpenAI's encoding_format), the input shapes TEI and
// OpenAI accept and the status each malformed one earns.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <limits>

#include "serve/api_error.h"
#include "serve/embedding_rows.h"
#include "serve/request_json.h"
#include "serve/response_json.h"

namespace stoke::serve {
namespace {

TEST(ServeJson, FloatsRoundTripShortest) {
  for (float v : {0.1f, -1.5e-7f, 3.4028235e38f, 1.0f, 0.0f, 1e-45f, 0.33333334f}) {
    std::string s;
    append_float(s, v);
    EXPECT_EQ(std::strtof(s.c_str(), nullptr), v) << s;
    EXPECT_LE(s.size(), 15u) << s;
  }
  std::string s;
  append_float(s, 0.1f);
  EXPECT_EQ(s, "0.1");
  s.clear();
  append_float(s, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(s, "null");
}

TEST(ServeJson, Base64OfLittleEndianFloats) {
  const float v[2] = {1.0f, -2.0f};  // 00 00 80 3f  00 00 00 c0
  std::string s;
  append_base64_floats(s, v, 2);
  EXPECT_EQ(s, "AACAPwAAAMA=");
  s.clear();
  append_base64_floats(s, v, 1);
  EXPECT_EQ(s, "AACAPw==");
}

int status_of(const std::string& body, size_t max_inputs = 4) {
  try {
    const simdjson::dom::object o = parse_object(body);
    InputLimits l;
    l.max_inputs = max_inputs;
    l.vocab_size = 100;
    parse_inputs(required_field(o, "inputs"), "inputs", l);
    return 200;
  } catch (const ApiError& e) {
    return e.status();
  }
}

TEST(ServeJson, InputShapes) {
  EXPECT_EQ(status_of(R"({"inputs": "a"})"), 200);
  EXPECT_EQ(status_of(R"({"inputs": ["a", "b"]})"), 200);
  EXPECT_EQ(status_of(R"({"inputs": [1, 2, 3]})"), 200);
  EXPECT_EQ(status_of(R"({"inputs": [[1, 2], [3]]})"), 200);
  EXPECT_EQ(status_of(R"({"inputs": ["a", [1]]})"), 200);
  EXPECT_EQ(status_of(R"({"inputs": [1, 100]})"), 422);
  EXPECT_EQ(status_of(R"({"inputs": ["a", "b", "c", "d", "e"]})"), 422);
  EXPECT_EQ(status_of(R"({"inputs": [1, 2, 3, 4, 5, 6]})"), 200);  // one input of six ids
  EXPECT_EQ(status_of(R"({"inputs": []})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": [[]]})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": ""})"), 400);
  EXPECT_EQ(status_of(R"({"inputs": [1, "a"]})"), 422);
  EXPECT_EQ(status_of(R"({"inputs": {}})"), 422);
  EXPECT_EQ(status_of(R"({"inputs": null})"), 422);
  EXPECT_EQ(status_of(R"({"inputs": "a")"), 400);
  EXPECT_EQ(status_of(std::string(100, '[') + std::string(100, ']')), 400);  // deeper than kMaxJsonDepth
}

TEST(ServeJson, DimensionsThenNormalize) {
  EXPECT_EQ(checked_dimensions(std::nullopt, 8, "dimensions"), 8);
  EXPECT_EQ(checked_dimensions(3, 8, "dimensions"), 3);
  EXPECT_THROW(checked_dimensions(0, 8, "dimensions"), ApiError);
  EXPECT_THROW(checked_dimensions(9, 8, "dimensions"), ApiError);
  const float row[4] = {3, 4, 100, 100};
  std::vector<float> out;
  shape_row(row, 2, true, out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_FLOAT_EQ(out[0], 0.6f);
  EXPECT_FLOAT_EQ(out[1], 0.8f);
  shape_row(row, 2, false, out);
  EXPECT_EQ(out, (std::vector<float>{3, 4}));
}

}  // namespace
}  // namespace stoke::serve
