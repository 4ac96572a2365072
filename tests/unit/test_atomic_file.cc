// write_file_atomic: the target ends with exactly the new bytes, an existing
// file is replaced, and no temporary file is left behind, also on failure. An
// existing path that is not a regular file (a FIFO, a device node, a symlink)
// is written into and never replaced, by write_file_atomic and OutputFile alike.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "io/atomic_file.h"
#include "jobs/output_file.h"
#include "support/fifo_reader.h"
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

// ---- existing paths that are not regular files: written into, never replaced

std::string big_text() {
  // Larger than a pipe's buffer: the writer must wait for the reader.
  std::string text;
  for (int i = 0; text.size() < 300000; ++i) text += "line " + std::to_string(i) + "\n";
  return text;
}

TEST(AtomicFile, DecidesByWhatThePathIs) {
  auto dir = test::scratch_dir("atomic_decide");
  EXPECT_EQ(output_write_for(dir / "new.txt"), OutputWrite::replace);
  write_file_atomic(dir / "file.txt", std::string_view("x"));
  EXPECT_EQ(output_write_for(dir / "file.txt"), OutputWrite::replace);
  std::filesystem::create_symlink(dir / "file.txt", dir / "link");
  EXPECT_EQ(output_write_for(dir / "link"), OutputWrite::in_place);  // lstat: a symlink, whatever it points at
  ASSERT_EQ(::mkfifo((dir / "fifo").c_str(), 0600), 0);
  EXPECT_EQ(output_write_for(dir / "fifo"), OutputWrite::in_place);
  EXPECT_EQ(output_write_for("/dev/null"), OutputWrite::in_place);
}

TEST(AtomicFile, WritesIntoAFifoWithoutReplacingIt) {
  auto dir = test::scratch_dir("atomic_fifo");
  const auto fifo = dir / "out.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const auto before = test::identity_of(fifo);
  const std::string text = big_text();
  {
    test::FifoReader reader(fifo);
    ASSERT_TRUE(reader.opened());
    write_file_atomic(fifo, std::string_view(text));
    EXPECT_EQ(reader.finish(), text);
  }
  EXPECT_EQ(test::identity_of(fifo), before);
  EXPECT_EQ(test::identity_of(fifo).type, S_IFIFO);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"out.fifo"}));  // no temp file beside it
  // OutputFile (classify/tokenize --output) the same way.
  {
    test::FifoReader reader(fifo);
    OutputFile out(fifo.string());
    out.write(text);
    out.commit();
    EXPECT_EQ(reader.finish(), text);
  }
  EXPECT_EQ(test::identity_of(fifo), before);
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"out.fifo"}));
}

TEST(AtomicFile, WritesIntoACharacterDeviceWithoutReplacingIt) {
  auto dir = test::scratch_dir("atomic_device");
  const auto dev = dir / "null";
  // A null device of our own (1,3), never the system's /dev/null.
  if (::mknod(dev.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0)
    GTEST_SKIP() << "mknod of a character device needs root (CI runs as root): " << std::strerror(errno);
  const auto before = test::identity_of(dev);
  write_file_atomic(dev, std::string_view("into the null device\n"));
  OutputFile out(dev.string());
  out.write("more\n");
  out.commit();
  EXPECT_EQ(test::identity_of(dev), before);
  struct stat st {};
  ASSERT_EQ(::lstat(dev.c_str(), &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
  EXPECT_EQ(st.st_rdev, makedev(1, 3));
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"null"}));
}

TEST(AtomicFile, WritesThroughASymlinkWithoutReplacingIt) {
  auto dir = test::scratch_dir("atomic_symlink");
  write_file_atomic(dir / "target.txt", std::string_view("an old and longer content\n"));
  const auto target_before = test::identity_of(dir / "target.txt");
  std::filesystem::create_symlink("target.txt", dir / "link");
  const auto link_before = test::identity_of(dir / "link");
  write_file_atomic(dir / "link", std::string_view("new\n"));
  EXPECT_EQ(test::identity_of(dir / "link"), link_before);
  EXPECT_EQ(test::identity_of(dir / "link").type, S_IFLNK);
  EXPECT_EQ(test::identity_of(dir / "target.txt"), target_before);
  EXPECT_EQ(read_all(dir / "target.txt"), "new\n");  // truncated, then written
  {
    OutputFile out((dir / "link").string());
    out.write("via OutputFile\n");
    out.commit();
  }
  EXPECT_EQ(test::identity_of(dir / "link"), link_before);
  EXPECT_EQ(read_all(dir / "target.txt"), "via OutputFile\n");
  EXPECT_EQ(names_in(dir), (std::vector<std::string>{"link", "target.txt"}));

  // A symlink to a FIFO (as /dev/stdout is a symlink to a pipe).
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  std::filesystem::create_symlink(dir / "pipe", dir / "stdout");
  const auto fifo_before = test::identity_of(dir / "pipe"), stdout_before = test::identity_of(dir / "stdout");
  test::FifoReader reader(dir / "pipe");
  write_file_atomic(dir / "stdout", std::string_view("to the pipe\n"));
  EXPECT_EQ(reader.finish(), "to the pipe\n");
  EXPECT_EQ(test::identity_of(dir / "pipe"), fifo_before);
  EXPECT_EQ(test::identity_of(dir / "stdout"), stdout_before);
}

}  // namespace
}  // namespace stoke
