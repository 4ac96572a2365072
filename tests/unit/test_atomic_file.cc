// write_file_atomic: the target ends with exactly the new bytes, an existing
// file is replaced, and no temporary file is left behind, also on failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

std::string read_all(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::string> names_in(const std::filesystem::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(AtomicFile, WritesTheExactBytes) {
  auto dir = test::scratch_dir("atomic_content");
  std::string text("binary\0data\xff\n", 13);
  write_file_atomic(dir / "a.bin", std::string_view(text));
  EXPECT_EQ(read_all(dir / "a.bin"), text);
  std::vector<std::byte> bytes(100000);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::byte>(i * 31 + 7);
  write_file_atomic(dir / "b.bin", bytes);
  std::string b = read_all(dir / "b.bin");
  ASSERT_EQ(b.size(), bytes.size());
  EXPECT_EQ(std::memcmp(b.data(), bytes.data(), b.size()), 0);
  write_file_atomic(dir / "empty.bin", std::string_view());
  EXPECT_EQ(std::filesystem::file_size(dir / "empty.bin"), 0u);
}

TEST(AtomicFile, ReplacesAnExistingFile) {
  auto dir = test::scratch_dir("atomic_replace");
  write_file_atomic(dir / "f.txt", std::string_view("a much longer first version\n"));
  write_file_atomic(dir / "f.txt", std::string_view("short\n"));
  EXPECT_EQ(read_all(dir / "f.txt"), "short\n");
}

TEST(AtomicFile, LeavesNoTempFile) {
  auto dir = test::scratch_dir("atomic_no_temp");
  for (int i = 0; i < 5; ++i) write_file_atomic(dir / "f.txt", std::string_view(std::to_string(i)));
  write_file_atomic(dir / "g.txt", std::string_view("g"));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"f.txt", "g.txt"}));
  for (const auto& name : names_in(dir)) EXPECT_FALSE(is_temp_name(dir / name)) << name;
}

TEST(AtomicFile, FailureThrowsIoAndLeavesNothing) {
  auto dir = test::scratch_dir("atomic_fail");
  // The target's folder does not exist: creating the temp file fails.
  try {
    write_file_atomic(dir / "missing" / "f.txt", std::string_view("x"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::io);
    EXPECT_NE(std::string(e.what()).find("missing"), std::string::npos) << e.what();
  }
  // The target is a folder: the rename fails and the temp file is removed.
  std::filesystem::create_directories(dir / "target");
  std::filesystem::create_directories(dir / "target" /
                                      "keep");  // non-empty: rename cannot replace it
  EXPECT_THROW(write_file_atomic(dir / "target", std::string_view("x")), Error);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"target"}));
}

TEST(AtomicFile, TempNames) {
  // The temp file sits beside the target: "<name>.stoke-tmp-<pid>-<n>" (atomic_file.cc).
  EXPECT_TRUE(is_temp_name("out/embeddings-00001.npy.stoke-tmp-1234-0"));
  EXPECT_TRUE(is_temp_name("model.safetensors.stoke-tmp-1-99"));
  EXPECT_FALSE(is_temp_name("out/embeddings-00001.npy"));
  EXPECT_FALSE(is_temp_name("model.safetensors"));
  EXPECT_FALSE(is_temp_name("stoke-tmp"));
  // Only the file name counts, not the folders above it.
  EXPECT_FALSE(is_temp_name("x.stoke-tmp-1-2/model.safetensors"));
}

}  // namespace
}  // namespace stoke
