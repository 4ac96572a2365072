#include "pipeline/batch_journal.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>

#include "core/crash_point.h"
#include "core/error.h"
#include "core/sha256.h"
#include "io/atomic_file.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

constexpr char kFileMagic[8] = {'S', 'T', 'K', 'P', 'R', 'O', 'W', '1'};
constexpr uint32_t kEntryMagic = 0x314A4B53;  // "SKJ1"
constexpr size_t kIdentityBytes = 64;        // a SHA-256 in hex
constexpr size_t kFileHeaderBytes = sizeof kFileMagic + kIdentityBytes + 8 + 8;
constexpr size_t kEntryHeaderBytes = 4 + 4 + 8 + 4 + 4;
constexpr size_t kDigestBytes = 32;
constexpr const char* kPrefix = "partial-";
constexpr const char* kSuffix = ".rows";

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

template <class T>
void put(std::vector<std::byte>& out, T v) {
  const size_t at = out.size();
  out.resize(at + sizeof v);
  std::memcpy(out.data() + at, &v, sizeof v);
}

template <class T>
T get(const std::byte* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

void write_all(int fd, const std::byte* data, size_t n, const fs::path& path) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) throw Error(Errc::io, path.string() + ": write failed: " + std::strerror(errno));
    data += w;
    n -= static_cast<size_t>(w);
  }
}

// The whole file; a file of a few hundred MB at most (a shard's rows in f32).
std::vector<std::byte> read_all(const fs::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(Errc::io, path.string() + ": cannot open: " + std::strerror(errno));
  std::vector<std::byte> data;
  std::byte chunk[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      throw Error(Errc::io, path.string() + ": read failed: " + std::strerror(saved));
    }
    if (n == 0) break;
    data.insert(data.end(), chunk, chunk + n);
  }
  ::close(fd);
  return data;
}

}  // namespace

std::string partial_rows_file_name(uint64_t window_first) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s%012llu%s", kPrefix, static_cast<unsigned long long>(window_first), kSuffix);
  return buf;
}

bool is_partial_rows_name(const fs::path& path) {
  const std::string name = path.filename().string();
  const size_t prefix = std::strlen(kPrefix), suffix = std::strlen(kSuffix);
  if (name.size() != prefix + 12 + suffix || !name.starts_with(kPrefix) || !name.ends_with(kSuffix)) return false;
  return std::all_of(name.begin() + static_cast<long>(prefix), name.end() - static_cast<long>(suffix),
                     [](char c) { return c >= '0' && c <= '9'; });
}

BatchJournal::BatchJournal(fs::path dir, std::string identity, int64_t width, uint64_t sort_window)
    : dir_(std::move(dir)), identity_(std::move(identity)), width_(width), sort_window_(sort_window) {
  if (identity_.size() != kIdentityBytes) throw Error(Errc::internal, "batch journal: the identity is not a SHA-256");
  if (width_ <= 0 || sort_window_ == 0) throw Error(Errc::internal, "batch journal: no width or window");
  load();
  last_sync_ = now_seconds();
}

BatchJournal::~BatchJournal() {
  for (auto& [first, f] : open_)
    if (f.fd >= 0) ::close(f.fd);
}

void BatchJournal::load() {
  std::vector<std::pair<fs::path, uint64_t>> files;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (is_partial_rows_name(e.path())) {
      const std::string name = e.path().filename().string();
      files.emplace_back(e.path(), std::stoull(name.substr(std::strlen(kPrefix), 12)));
    }
  if (ec) throw Error(Errc::io, dir_.string() + ": cannot list the folder: " + ec.message());
  std::sort(files.begin(), files.end());
  for (const auto& [path, first] : files) load_file(path, first);
}

// Keeps the whole entries of one window's file, cuts a torn tail, and removes
// a file that is not this run's.
void BatchJournal::load_file(const fs::path& path, uint64_t window_first) {
  const std::vector<std::byte> data = read_all(path);
  const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
  const bool ours = data.size() >= kFileHeaderBytes && std::memcmp(data.data(), kFileMagic, sizeof kFileMagic) == 0 &&
                    std::memcmp(data.data() + sizeof kFileMagic, identity_.data(), kIdentityBytes) == 0 &&
                    get<uint64_t>(data.data() + sizeof kFileMagic + kIdentityBytes) == static_cast<uint64_t>(width_) &&
                    get<uint64_t>(data.data() + sizeof kFileMagic + kIdentityBytes + 8) == window_first &&
                    window_first % sort_window_ == 0;
  if (!ours) {
    fs::remove(path);
    cleanup_note_ += (cleanup_note_.empty() ? "" : "; ") + path.filename().string() +
                     " was not this run's (other settings, or cut short before its header): removed";
    return;
  }
  size_t at = kFileHeaderBytes;
  uint64_t kept = 0;
  while (at + kEntryHeaderBytes <= data.size()) {
    const std::byte* h = data.data() + at;
    const uint32_t magic = get<uint32_t>(h), ordinal = get<uint32_t>(h + 4);
    const uint64_t first = get<uint64_t>(h + 8);
    const uint32_t count = get<uint32_t>(h + 16), width = get<uint32_t>(h + 20);
    if (magic != kEntryMagic || first != window_first || width != static_cast<uint32_t>(width_) || count == 0 ||
        count > sort_window_)
      break;
    const size_t body = kEntryHeaderBytes + count * sizeof(uint64_t) + count * row_bytes;
    if (at + body + kDigestBytes > data.size()) break;
    Sha256 sha;
    sha.update(h, body);
    if (std::memcmp(sha.digest().data(), h + body, kDigestBytes) != 0) break;
    Entry e;
    e.file = path;
    e.records.resize(count);
    std::memcpy(e.records.data(), h + kEntryHeaderBytes, count * sizeof(uint64_t));
    e.rows_offset = at + kEntryHeaderBytes + count * sizeof(uint64_t);
    std::vector<uint64_t>& window_records = kept_records_[window_first];
    window_records.insert(window_records.end(), e.records.begin(), e.records.end());
    entries_[{window_first, ordinal}] = std::move(e);
    rows_found_ += count;
    kept++;
    at += body + kDigestBytes;
  }
  if (at < data.size()) {
    // A kill mid-append: cut the torn entry so this run's appends follow whole ones.
    fs::resize_file(path, at);
    cleanup_note_ += (cleanup_note_.empty() ? "" : "; ") + path.filename().string() + ": " +
                     std::to_string(data.size() - at) + " bytes of a batch cut short were dropped";
  }
}

bool BatchJournal::lookup(uint64_t window_first, uint32_t ordinal, std::span<const uint64_t> records,
                          float* out) const {
  std::lock_guard lock(mu_);
  const auto it = entries_.find({window_first, ordinal});
  if (it == entries_.end()) return false;
  const Entry& e = it->second;
  if (!std::equal(records.begin(), records.end(), e.records.begin(), e.records.end())) return false;
  const int fd = ::open(e.file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(Errc::io, e.file.string() + ": cannot open: " + std::strerror(errno));
  const size_t bytes = records.size() * static_cast<size_t>(width_) * sizeof(float);
  size_t done = 0;
  while (done < bytes) {
    const ssize_t n = ::pread(fd, reinterpret_cast<char*>(out) + done, bytes - done,
                              static_cast<off_t>(e.rows_offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw Error(Errc::io, e.file.string() + ": read failed (the file changed under the run)");
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return true;
}

BatchJournal::OpenFile& BatchJournal::file_for(uint64_t window_first) {
  OpenFile& f = open_[window_first];
  if (f.fd >= 0) return f;
  const fs::path path = dir_ / partial_rows_file_name(window_first);
  std::error_code ec;
  const bool existed = fs::exists(path, ec);
  f.fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (f.fd < 0) throw Error(Errc::io, path.string() + ": cannot open for append: " + std::strerror(errno));
  if (!existed) {
    std::vector<std::byte> header(sizeof kFileMagic);
    std::memcpy(header.data(), kFileMagic, sizeof kFileMagic);
    const auto* id = reinterpret_cast<const std::byte*>(identity_.data());
    header.insert(header.end(), id, id + kIdentityBytes);
    put<uint64_t>(header, static_cast<uint64_t>(width_));
    put<uint64_t>(header, window_first);
    write_all(f.fd, header.data(), header.size(), path);
    fsync_directory(dir_);  // the file's name is durable before its first fsync'd entry counts
  }
  return f;
}

void BatchJournal::record(uint64_t window_first, uint32_t ordinal, std::span<const uint64_t> records,
                          const float* rows) {
  std::lock_guard lock(mu_);
  OpenFile& f = file_for(window_first);
  const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
  buffer_.clear();
  put<uint32_t>(buffer_, kEntryMagic);
  put<uint32_t>(buffer_, ordinal);
  put<uint64_t>(buffer_, window_first);
  put<uint32_t>(buffer_, static_cast<uint32_t>(records.size()));
  put<uint32_t>(buffer_, static_cast<uint32_t>(width_));
  const auto* r = reinterpret_cast<const std::byte*>(records.data());
  buffer_.insert(buffer_.end(), r, r + records.size() * sizeof(uint64_t));
  const auto* v = reinterpret_cast<const std::byte*>(rows);
  buffer_.insert(buffer_.end(), v, v + records.size() * row_bytes);
  Sha256 sha;
  sha.update(buffer_.data(), buffer_.size());
  const auto digest = sha.digest();
  const auto* d = reinterpret_cast<const std::byte*>(digest.data());
  buffer_.insert(buffer_.end(), d, d + digest.size());
  crash_point("journal-append");
  write_all(f.fd, buffer_.data(), buffer_.size(), dir_ / partial_rows_file_name(window_first));
  crash_point("journal-appended");
  f.dirty = true;
  std::vector<uint64_t>& window_records = kept_records_[window_first];
  window_records.insert(window_records.end(), records.begin(), records.end());
  if (const double t = now_seconds(); t - last_sync_ >= 1.0) {
    for (auto& [first, o] : open_)
      if (o.dirty && o.fd >= 0 && ::fsync(o.fd) == 0) o.dirty = false;
    last_sync_ = t;
  }
}

void BatchJournal::sync() {
  std::lock_guard lock(mu_);
  for (auto& [first, f] : open_)
    if (f.dirty && f.fd >= 0) {
      if (::fsync(f.fd) != 0)
        throw Error(Errc::io, (dir_ / partial_rows_file_name(first)).string() + ": fsync failed: " +
                                  std::strerror(errno));
      f.dirty = false;
    }
  last_sync_ = now_seconds();
}

void BatchJournal::close_and_remove(uint64_t window_first) {
  if (auto it = open_.find(window_first); it != open_.end()) {
    if (it->second.fd >= 0) ::close(it->second.fd);
    open_.erase(it);
  }
  for (auto it = entries_.lower_bound({window_first, 0}); it != entries_.end() && it->first.first == window_first;)
    it = entries_.erase(it);
  kept_records_.erase(window_first);
  std::error_code ec;
  fs::remove(dir_ / partial_rows_file_name(window_first), ec);
}

void BatchJournal::forget_before(uint64_t records) {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> done;
  for (const auto& [first, rs] : kept_records_)
    if (first + sort_window_ <= records) done.push_back(first);
  for (const auto& [first, f] : open_)
    if (first + sort_window_ <= records) done.push_back(first);
  for (uint64_t first : done) close_and_remove(first);
}

void BatchJournal::forget_all() {
  std::lock_guard lock(mu_);
  std::vector<uint64_t> all;
  for (const auto& [first, rs] : kept_records_) all.push_back(first);
  for (const auto& [first, f] : open_) all.push_back(first);
  for (uint64_t first : all) close_and_remove(first);
  // Files no entry named (a header with no whole entry yet).
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec))
    if (is_partial_rows_name(e.path())) fs::remove(e.path(), ec);
}

uint64_t BatchJournal::rows_kept_from(uint64_t records) const {
  std::lock_guard lock(mu_);
  uint64_t n = 0;
  for (const auto& [first, rs] : kept_records_)
    for (uint64_t r : rs) n += r >= records ? 1 : 0;
  return n;
}

}  // namespace stoke
