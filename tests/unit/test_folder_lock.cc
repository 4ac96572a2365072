// FolderLock (io/folder_lock.h): one holder at a time, a second one refused
// with a line naming the holder's job, pid and host; released with its holder
// (and a holder killed with SIGKILL releases it too); the O_EXCL fallback for
// filesystems without flock takes over a lock file whose holder died on this
// host, and refuses one held elsewhere.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "io/folder_lock.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

std::string host() {
  char buf[256] = {};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

// The error a second acquire gives, "" when it succeeded.
std::string refusal(const fs::path& dir, FolderLockKind kind) {
  try {
    FolderLock again = FolderLock::acquire(dir, "train", kind);
    return "";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::refused) << e.what();
    return e.what();
  }
}

// A pid that was alive and is not any more.
pid_t dead_pid() {
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  int status = 0;
  ::waitpid(child, &status, 0);
  return child;
}

TEST(FolderLock, SecondHolderIsRefusedNamingTheFirst) {
  const fs::path dir = test::scratch_dir("lock-second") / "out";  // made by acquire
  {
    FolderLock lock = FolderLock::acquire(dir, "embed");
    EXPECT_EQ(lock.kind(), FolderLockKind::flock);
    EXPECT_EQ(lock.note(), "");
    ASSERT_TRUE(fs::exists(dir / kFolderLockName));
    const json holder = json::parse(read_file(dir / kFolderLockName));
    EXPECT_EQ(holder["pid"].get<long>(), static_cast<long>(::getpid()));
    EXPECT_EQ(holder["job"], "embed");
    EXPECT_EQ(holder["host"], host());
    // flock locks an open file description: the same process is refused too.
    const std::string why = refusal(dir, FolderLockKind::flock);
    EXPECT_NE(why.find("in use by stoke embed, pid " + std::to_string(::getpid()) + " on host " + host()),
              std::string::npos)
        << why;
    EXPECT_NE(why.find(dir.string()), std::string::npos) << why;
  }
  // Released: the file is gone and the next holder gets it.
  EXPECT_FALSE(fs::exists(dir / kFolderLockName));
  EXPECT_EQ(refusal(dir, FolderLockKind::flock), "");
}

TEST(FolderLock, KilledHolderReleasesIt) {
  const fs::path dir = test::scratch_dir("lock-killed");
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      FolderLock lock = FolderLock::acquire(dir, "embed");
      (void)!::write(ready[1], "1", 1);
      for (;;) ::pause();
    } catch (...) {
      ::_exit(3);
    }
  }
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1);
  EXPECT_NE(refusal(dir, FolderLockKind::flock).find("pid " + std::to_string(child)), std::string::npos);
  ::kill(child, SIGKILL);
  int status = 0;
  ::waitpid(child, &status, 0);
  // The lock file is still there (no destructor ran), but the kernel dropped the flock.
  EXPECT_TRUE(fs::exists(dir / kFolderLockName));
  EXPECT_EQ(refusal(dir, FolderLockKind::flock), "");
  ::close(ready[0]);
  ::close(ready[1]);
}

TEST(FolderLock, ExclusiveFileFallback) {
  const fs::path dir = test::scratch_dir("lock-excl");
  {
    FolderLock lock = FolderLock::acquire(dir, "embed", FolderLockKind::exclusive_file);
    EXPECT_EQ(lock.kind(), FolderLockKind::exclusive_file);
    EXPECT_NE(lock.note().find("has no flock"), std::string::npos) << lock.note();
    const std::string why = refusal(dir, FolderLockKind::exclusive_file);
    EXPECT_NE(why.find("in use by stoke embed, pid " + std::to_string(::getpid())), std::string::npos) << why;
  }
  EXPECT_FALSE(fs::exists(dir / kFolderLockName));

  // Left by a holder that died on this host: taken over.
  std::ofstream(dir / kFolderLockName) << json{{"job", "embed"}, {"pid", dead_pid()}, {"host", host()}}.dump();
  {
    FolderLock lock = FolderLock::acquire(dir, "train", FolderLockKind::exclusive_file);
    EXPECT_EQ(json::parse(read_file(dir / kFolderLockName))["pid"].get<long>(), static_cast<long>(::getpid()));
  }
  // Held on another host: whether it lives cannot be told from here.
  std::ofstream(dir / kFolderLockName) << json{{"job", "embed"}, {"pid", dead_pid()}, {"host", "elsewhere"}}.dump();
  EXPECT_NE(refusal(dir, FolderLockKind::exclusive_file).find("on host elsewhere"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir / kFolderLockName));
}

TEST(FolderLock, AFolderItMadeGoesOnlyWhenEmpty) {
  const fs::path root = test::scratch_dir("lock-made");
  { FolderLock lock = FolderLock::acquire(root / "new", "embed"); }
  EXPECT_FALSE(fs::exists(root / "new"));  // a run that failed before writing leaves nothing
  {
    FolderLock lock = FolderLock::acquire(root / "written", "embed");
    std::ofstream(root / "written" / "manifest.json") << "{}";
  }
  EXPECT_TRUE(fs::exists(root / "written" / "manifest.json"));
  fs::create_directories(root / "existing");
  { FolderLock lock = FolderLock::acquire(root / "existing", "embed"); }
  EXPECT_TRUE(fs::exists(root / "existing"));  // not ours to remove
}

TEST(FolderLock, RefusesAFileAndNamesTheLockFile) {
  const fs::path dir = test::scratch_dir("lock-file");
  std::ofstream(dir / "plain") << "x";
  try {
    FolderLock::acquire(dir / "plain", "embed");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
  }
  EXPECT_TRUE(is_folder_lock_name(dir / ".stoke.lock"));
  EXPECT_FALSE(is_folder_lock_name(dir / "manifest.json"));
}

}  // namespace
}  // namespace stoke
