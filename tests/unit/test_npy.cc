// The .npy header reader: reads back what write_npy writes, reads the headers
// numpy writes, and refuses malformed ones with a message saying what is wrong.
//
// The "numpy writes" headers below are spelled the way numpy.lib.format builds
// them (format.py, _write_array_header): repr of the dict with sorted keys and
// a trailing ", }", padded with spaces so that magic + length + dict + "\n" is
// a multiple of 64 bytes; version 2.0 has a 4-byte length.
#include <gtest/gtest.h>

#include <fstream>

#include "core/error.h"
#include "io/npy.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

// A header like numpy's: version 1.0 (2-byte length) or 2.0 (4-byte length).
std::string numpy_header(const std::string& dict, int major = 1) {
  const size_t prefix = major == 1 ? 10 : 12;
  std::string d = dict;
  d.append((64 - (prefix + d.size() + 1) % 64) % 64, ' ');
  d.push_back('\n');
  std::string h("\x93NUMPY", 6);
  h.push_back(static_cast<char>(major));
  h.push_back('\0');
  const size_t n = d.size();
  for (size_t i = 0; i < prefix - 8; ++i) h.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  return h + d;
}

std::string error_of(std::string_view bytes) {
  try {
    parse_npy_header(bytes);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    return e.what();
  }
  return "(accepted)";
}

TEST(NpyHeader, ReadsBackWhatWriteNpyWrites) {
  for (const auto& [dtype, descr, rows, cols] :
       {std::tuple{DType::f32, "<f4", 3, 4}, std::tuple{DType::f16, "<f2", 1, 768}, std::tuple{DType::f32, "<f4", 0, 64},
        std::tuple{DType::f32, "<f4", 100000, 1024}}) {
    const std::string header = npy_header(dtype, rows, cols);
    const NpyHeader h = parse_npy_header(header);
    EXPECT_EQ(h.major_version, 1);
    EXPECT_EQ(h.descr, descr);
    EXPECT_FALSE(h.fortran_order);
    EXPECT_EQ(h.shape, (std::vector<int64_t>{rows, cols}));
    EXPECT_EQ(h.data_offset, header.size());
    EXPECT_EQ(h.data_offset % 64, 0u);
  }
  const fs::path dir = test::scratch_dir("npy-read");
  std::vector<std::byte> data(2 * 3 * 4);
  write_npy(dir / "a.npy", DType::f32, 2, 3, data);
  const NpyHeader h = read_npy_header(dir / "a.npy");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.data_offset + data.size(), fs::file_size(dir / "a.npy"));
}

TEST(NpyHeader, ReadsWhatNumpyWrites) {
  NpyHeader h = parse_npy_header(numpy_header("{'descr': '<f2', 'fortran_order': False, 'shape': (5,), }"));
  EXPECT_EQ(h.descr, "<f2");
  EXPECT_EQ(h.shape, std::vector<int64_t>{5});
  h = parse_npy_header(numpy_header("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"));
  EXPECT_EQ(h.descr, "<f8");
  EXPECT_TRUE(h.shape.empty());
  h = parse_npy_header(numpy_header("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"));
  EXPECT_TRUE(h.fortran_order);
  h = parse_npy_header(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 2));
  EXPECT_EQ(h.major_version, 2);
  EXPECT_EQ(h.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(h.data_offset % 64, 0u);
  // Any key order, no trailing comma, three dimensions.
  h = parse_npy_header(numpy_header("{'shape': (1, 2, 3), 'fortran_order': False, 'descr': '|u1'}"));
  EXPECT_EQ(h.descr, "|u1");
  EXPECT_EQ(h.shape, (std::vector<int64_t>{1, 2, 3}));
}

TEST(NpyHeader, RefusesMalformedHeaders) {
  const std::string good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }";
  EXPECT_EQ(error_of(numpy_header(good)), "(accepted)");  // the cases below differ from this in one thing
  EXPECT_NE(error_of("NUMPY" + numpy_header(good).substr(6)).find("magic"), std::string::npos);
  std::string v4 = numpy_header(good);
  v4[6] = 4;
  EXPECT_NE(error_of(v4).find("version 4.0"), std::string::npos);
  EXPECT_NE(error_of(numpy_header(good).substr(0, 40)).find("only 30 follow"), std::string::npos);
  std::string no_newline = numpy_header(good);
  no_newline.back() = ' ';
  EXPECT_NE(error_of(no_newline).find("newline"), std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'shape': (2, 3), }")).find("needs the keys"), std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'x': 1}"))
                .find("unexpected or repeated key 'x'"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}"))
                .find("repeated key 'descr'"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (5), }")).find("(n,)"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (-2, 3), }"))
                .find("non-negative integer"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }")).find("True or False"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }"))
                .find("structured"),
            std::string::npos);
  EXPECT_NE(error_of(numpy_header(good + " x")).find("after the dict"), std::string::npos);
  EXPECT_NE(error_of(numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,)}"))
                .find("too large"),
            std::string::npos);
}

TEST(NpyHeader, ReadFromFileNamesTheFile) {
  const fs::path dir = test::scratch_dir("npy-file");
  try {
    read_npy_header(dir / "none.npy");
    FAIL() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::not_found);
  }
  std::ofstream(dir / "short.npy", std::ios::binary) << numpy_header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }").substr(0, 50);
  try {
    read_npy_header(dir / "short.npy");
    FAIL() << "a torn header was read";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::format);
    EXPECT_NE(std::string(e.what()).find("short.npy: npy header:"), std::string::npos) << e.what();
  }
}

TEST(NpyHeader, ItemSizeOfDescr) {
  EXPECT_EQ(npy_descr_itemsize("<f4"), 4u);
  EXPECT_EQ(npy_descr_itemsize("<f2"), 2u);
  EXPECT_EQ(npy_descr_itemsize("<f8"), 8u);
  EXPECT_EQ(npy_descr_itemsize("|u1"), 1u);
  EXPECT_EQ(npy_descr_itemsize("<U10"), 0u);  // unicode strings: not counted
  EXPECT_EQ(npy_descr_itemsize("f4"), 0u);
}

}  // namespace
}  // namespace stoke
