#include "io/torch_zip.h"

#include <algorithm>
#include <array>

#include "core/utf8.h"

namespace stoke {

namespace {

// Record sizes and signatures of the zip format (APPNOTE.TXT 4.3).
constexpr uint32_t kLocalSig = 0x04034b50;
constexpr uint32_t kCentralSig = 0x02014b50;
constexpr uint32_t kEndSig = 0x06054b50;
constexpr uint32_t kEnd64Sig = 0x06064b50;
constexpr uint32_t kEnd64LocatorSig = 0x07064b50;
constexpr uint64_t kLocalBytes = 30;
constexpr uint64_t kCentralBytes = 46;
constexpr uint64_t kEndBytes = 22;
constexpr uint64_t kEnd64Bytes = 56;  // with its fixed fields only
constexpr uint64_t kEnd64LocatorBytes = 20;
constexpr uint64_t kMaxComment = 0xFFFF;
constexpr uint16_t kZip64ExtraId = 0x0001;
constexpr uint16_t kFlagEncrypted = 0x0001;
constexpr uint16_t kFlagStrongEncryption = 0x0040;
constexpr uint16_t kFlagDataDescriptor = 0x0008;
constexpr uint32_t kU32Sentinel = 0xFFFFFFFF;
constexpr uint16_t kU16Sentinel = 0xFFFF;

uint64_t le(const std::byte* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

std::string method_name(uint64_t method) {
  switch (method) {
    case 1: return "shrink";
    case 6: return "implode";
    case 8: return "deflate";
    case 9: return "deflate64";
    case 12: return "bzip2";
    case 14: return "lzma";
    case 93: return "zstd";
    case 95: return "xz";
    case 98: return "ppmd";
    case 99: return "AES-encrypted";
    default: return "an unknown method";
  }
}

// Why `name` is not an entry name torch writes, or "" when it is fine. Names
// are only looked up, never used as paths, but an archive holding
// "../../etc/passwd" or "C:\x" was not written by torch.save.
std::string name_problem(std::string_view name) {
  if (name.empty()) return "is empty";
  if (!utf8_is_valid(name)) return "is not valid UTF-8";
  for (char c : name)
    if (static_cast<unsigned char>(c) < 0x20) return "holds a control byte";
  if (name.front() == '/') return "is absolute";
  if (name.find('\\') != std::string_view::npos) return "holds a backslash";
  if (name.back() == '/') return "is a directory entry (torch.save writes none)";
  size_t start = 0;
  while (start <= name.size()) {
    size_t end = name.find('/', start);
    if (end == std::string_view::npos) end = name.size();
    const std::string_view part = name.substr(start, end - start);
    if (part.empty()) return "has an empty path component";
    if (part == "..") return "has a \"..\" component";
    if (part == ".") return "has a \".\" component";
    start = end + 1;
  }
  return "";
}

constexpr std::array<uint32_t, 256> make_crc_table() {
  std::array<uint32_t, 256> t{};
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
    t[i] = c;
  }
  return t;
}
constexpr std::array<uint32_t, 256> kCrcTable = make_crc_table();

// The zip64 extended-information extra field of a central entry: the fields
// whose 32-bit (or 16-bit) slot holds the sentinel, in the spec's order.
struct Zip64Fields {
  uint64_t* size;
  uint64_t* compressed;
  uint64_t* offset;
  uint64_t* disk;
};

}  // namespace

uint32_t crc32_of(std::span<const std::byte> bytes) {
  uint32_t c = 0xFFFFFFFFu;
  for (std::byte b : bytes) c = kCrcTable[(c ^ static_cast<uint8_t>(b)) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

TorchZip::TorchZip(std::span<const std::byte> bytes, std::string label) : bytes_(bytes), label_(std::move(label)) {
  const uint64_t size = bytes_.size();
  const std::byte* base = bytes_.data();
  auto fail = [&](TorchCheckpointErrc kind, const std::string& what) -> TorchCheckpointError {
    return TorchCheckpointError(kind, label_ + ": " + what);
  };
  auto entry_fail = [&](TorchCheckpointErrc kind, const std::string& name, const std::string& what) {
    return fail(kind, "zip entry " + torch_quote(name) + ": " + what);
  };

  // ---- end of central directory: the last "PK\5\6" whose comment ends the file
  if (size < kEndBytes)
    throw fail(TorchCheckpointErrc::not_zip, "no zip end-of-central-directory record (the file is " +
                                                 std::to_string(size) +
                                                 " bytes): not a zip archive (torch.save writes one)");
  uint64_t end_pos = UINT64_MAX;
  const uint64_t lowest = size - kEndBytes > kMaxComment ? size - kEndBytes - kMaxComment : 0;
  for (uint64_t p = size - kEndBytes + 1; p-- > lowest;) {
    if (le(base + p, 4) == kEndSig && p + kEndBytes + le(base + p + 20, 2) == size) {
      end_pos = p;
      break;
    }
  }
  if (end_pos == UINT64_MAX)
    throw fail(TorchCheckpointErrc::not_zip,
               "no zip end-of-central-directory record: not a zip archive (torch.save writes one)");
  const std::byte* end = base + end_pos;
  const uint64_t disk = le(end + 4, 2), cd_disk = le(end + 6, 2);
  uint64_t count_disk = le(end + 8, 2), count = le(end + 10, 2);
  uint64_t cd_size = le(end + 12, 4), cd_offset = le(end + 16, 4);
  const bool sentinel = disk == kU16Sentinel || cd_disk == kU16Sentinel || count_disk == kU16Sentinel ||
                        count == kU16Sentinel || cd_size == kU32Sentinel || cd_offset == kU32Sentinel;

  // ---- zip64: torch writes its end record and locator into every archive
  uint64_t cd_end = end_pos;
  const bool has_locator = end_pos >= kEnd64LocatorBytes && le(end - kEnd64LocatorBytes, 4) == kEnd64LocatorSig;
  if (has_locator) {
    const std::byte* loc = end - kEnd64LocatorBytes;
    const uint64_t loc_pos = end_pos - kEnd64LocatorBytes;
    const uint64_t e64_pos = le(loc + 8, 8);
    if (le(loc + 4, 4) != 0 || le(loc + 16, 4) > 1)
      throw fail(TorchCheckpointErrc::zip_malformed, "a multi-disk zip archive (torch.save writes one file)");
    if (e64_pos > loc_pos || loc_pos - e64_pos < kEnd64Bytes)
      throw fail(TorchCheckpointErrc::zip_out_of_bounds,
                 "the zip64 end record at byte " + std::to_string(e64_pos) + " does not fit before its locator at " +
                     std::to_string(loc_pos));
    const std::byte* e64 = base + e64_pos;
    if (le(e64, 4) != kEnd64Sig)
      throw fail(TorchCheckpointErrc::zip_malformed,
                 "no zip64 end record at byte " + std::to_string(e64_pos) + " where its locator points");
    // The record's own size counts what follows its first 12 bytes; it must end at the locator.
    if (le(e64 + 4, 8) != loc_pos - e64_pos - 12)
      throw fail(TorchCheckpointErrc::zip_malformed, "the zip64 end record's size does not reach its locator");
    const uint64_t disk64 = le(e64 + 16, 4), cd_disk64 = le(e64 + 20, 4);
    const uint64_t count_disk64 = le(e64 + 24, 8), count64 = le(e64 + 32, 8);
    const uint64_t cd_size64 = le(e64 + 40, 8), cd_offset64 = le(e64 + 48, 8);
    auto agrees = [](uint64_t v32, uint64_t v64, uint64_t sentinel_value) {
      return v32 == sentinel_value || v32 == v64;
    };
    if (!agrees(disk, disk64, kU16Sentinel) || !agrees(cd_disk, cd_disk64, kU16Sentinel) ||
        !agrees(count_disk, count_disk64, kU16Sentinel) || !agrees(count, count64, kU16Sentinel) ||
        !agrees(cd_size, cd_size64, kU32Sentinel) || !agrees(cd_offset, cd_offset64, kU32Sentinel))
      throw fail(TorchCheckpointErrc::zip_malformed, "the zip64 end record and the end record disagree");
    if (disk64 != 0 || cd_disk64 != 0)
      throw fail(TorchCheckpointErrc::zip_malformed, "a multi-disk zip archive (torch.save writes one file)");
    count_disk = count_disk64;
    count = count64;
    cd_size = cd_size64;
    cd_offset = cd_offset64;
    cd_end = e64_pos;
  } else if (sentinel) {
    throw fail(TorchCheckpointErrc::zip_malformed, "the end record asks for zip64 records but there is no locator");
  } else if (disk != 0 || cd_disk != 0) {
    throw fail(TorchCheckpointErrc::zip_malformed, "a multi-disk zip archive (torch.save writes one file)");
  }
  if (count_disk != count)
    throw fail(TorchCheckpointErrc::zip_malformed, "the end record counts " + std::to_string(count_disk) +
                                                       " entries on this disk but " + std::to_string(count) + " in all");
  if (cd_offset > cd_end || cd_size > cd_end - cd_offset)
    throw fail(TorchCheckpointErrc::zip_out_of_bounds,
               "the central directory (" + std::to_string(cd_size) + " bytes at " + std::to_string(cd_offset) +
                   ") runs past the end records at byte " + std::to_string(cd_end));
  if (cd_offset + cd_size != cd_end)
    throw fail(TorchCheckpointErrc::zip_malformed,
               std::to_string(cd_end - cd_offset - cd_size) +
                   " bytes between the central directory and the end records (torch.save writes none)");
  if (count > kMaxZipEntries)
    throw fail(TorchCheckpointErrc::zip_too_many_entries,
               "the archive claims " + std::to_string(count) + " entries (limit " + std::to_string(kMaxZipEntries) + ")");
  if (count * kCentralBytes > cd_size)  // before reserving anything for them
    throw fail(TorchCheckpointErrc::zip_out_of_bounds,
               "the archive claims " + std::to_string(count) + " entries but its central directory holds " +
                   std::to_string(cd_size) + " bytes");

  // ---- the central directory
  entries_.reserve(count);
  uint64_t at = cd_offset;
  for (uint64_t i = 0; i < count; ++i) {
    const std::string where = "central directory entry " + std::to_string(i);
    if (cd_end - at < kCentralBytes)
      throw fail(TorchCheckpointErrc::zip_out_of_bounds, where + " runs past the central directory");
    const std::byte* c = base + at;
    if (le(c, 4) != kCentralSig)
      throw fail(TorchCheckpointErrc::zip_malformed, where + " at byte " + std::to_string(at) + " has no signature");
    const uint64_t flags = le(c + 8, 2), method = le(c + 10, 2);
    ZipEntry e;
    e.crc32 = static_cast<uint32_t>(le(c + 16, 4));
    uint64_t compressed = le(c + 20, 4), size32 = le(c + 24, 4);
    const uint64_t name_len = le(c + 28, 2), extra_len = le(c + 30, 2), comment_len = le(c + 32, 2);
    uint64_t disk_start = le(c + 34, 2), offset = le(c + 42, 4);
    if (cd_end - at - kCentralBytes < name_len + extra_len + comment_len)
      throw fail(TorchCheckpointErrc::zip_out_of_bounds, where + ": its name and extra fields run past the directory");
    e.name.assign(reinterpret_cast<const char*>(c + kCentralBytes), name_len);
    if (std::string why = name_problem(e.name); !why.empty())
      throw fail(TorchCheckpointErrc::zip_bad_name, "zip entry name " + torch_quote(e.name) + " " + why);

    // zip64 extended information: the fields whose slots hold the sentinel, in order.
    uint64_t size = size32;
    Zip64Fields want{size32 == kU32Sentinel ? &size : nullptr, compressed == kU32Sentinel ? &compressed : nullptr,
                     offset == kU32Sentinel ? &offset : nullptr, disk_start == kU16Sentinel ? &disk_start : nullptr};
    bool zip64_seen = false;
    const std::byte* x = c + kCentralBytes + name_len;
    for (uint64_t k = 0; k < extra_len;) {
      if (extra_len - k < 4) throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "a truncated extra field");
      const uint64_t id = le(x + k, 2), len = le(x + k + 2, 2);
      if (extra_len - k - 4 < len)
        throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "an extra field runs past its entry");
      if (id == kZip64ExtraId) {
        if (zip64_seen) throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "two zip64 extra fields");
        zip64_seen = true;
        uint64_t p = 0;
        for (uint64_t* field : {want.size, want.compressed, want.offset}) {
          if (!field) continue;
          if (len - p < 8) throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "a short zip64 extra field");
          *field = le(x + k + 4 + p, 8);
          p += 8;
        }
        if (want.disk) {
          if (len - p < 4) throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "a short zip64 extra field");
          *want.disk = le(x + k + 4 + p, 4);
        }
      }
      k += 4 + len;
    }
    if ((want.size || want.compressed || want.offset || want.disk) && !zip64_seen)
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "sizes that need a zip64 extra field it lacks");
    if (flags & (kFlagEncrypted | kFlagStrongEncryption))
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "is encrypted (torch.save never encrypts)");
    if (method != 0)
      throw entry_fail(TorchCheckpointErrc::zip_compressed, e.name,
                       "is compressed (method " + std::to_string(method) + ", " + method_name(method) + ", " +
                           std::to_string(compressed) + " bytes claiming " + std::to_string(size) +
                           "): torch.save never compresses, and stoke reads only stored entries");
    if (compressed != size)
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name,
                       "is stored but its sizes differ (" + std::to_string(compressed) + " and " +
                           std::to_string(size) + " bytes)");
    if (disk_start != 0)
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "starts on another disk (a multi-disk archive)");
    e.header_offset = offset;
    e.size = size;
    if (!index_.emplace(e.name, entries_.size()).second)
      throw entry_fail(TorchCheckpointErrc::zip_duplicate_name, e.name, "appears twice in the central directory");
    entries_.push_back(std::move(e));
    at += kCentralBytes + name_len + extra_len + comment_len;
  }
  if (at != cd_end)
    throw fail(TorchCheckpointErrc::zip_malformed, std::to_string(cd_end - at) +
                                                       " bytes in the central directory after its " +
                                                       std::to_string(count) + " entries");

  // ---- local headers: each must agree with the central directory and end before it
  for (ZipEntry& e : entries_) {
    if (e.header_offset > cd_offset || cd_offset - e.header_offset < kLocalBytes)
      throw entry_fail(TorchCheckpointErrc::zip_out_of_bounds, e.name,
                       "its local header at byte " + std::to_string(e.header_offset) +
                           " is not before the central directory at " + std::to_string(cd_offset));
    const std::byte* l = base + e.header_offset;
    if (le(l, 4) != kLocalSig)
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name,
                       "no local header signature at byte " + std::to_string(e.header_offset));
    const uint64_t flags = le(l + 6, 2), method = le(l + 8, 2);
    const uint64_t crc = le(l + 14, 4), compressed = le(l + 18, 4), size = le(l + 22, 4);
    const uint64_t name_len = le(l + 26, 2), extra_len = le(l + 28, 2);
    if (flags & (kFlagEncrypted | kFlagStrongEncryption))
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "is encrypted (torch.save never encrypts)");
    if (method != 0)
      throw entry_fail(TorchCheckpointErrc::zip_compressed, e.name,
                       "its local header says compressed (method " + std::to_string(method) + ", " +
                           method_name(method) + "): torch.save never compresses");
    if (cd_offset - e.header_offset - kLocalBytes < name_len + extra_len)
      throw entry_fail(TorchCheckpointErrc::zip_out_of_bounds, e.name, "its local header runs into the central directory");
    if (std::string_view(reinterpret_cast<const char*>(l + kLocalBytes), name_len) != e.name)
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name, "its local header names another entry");
    // With flag 3 the local CRC and sizes may be zero (they follow the data); otherwise they
    // must be the central directory's, or the zip64 sentinel for a size.
    const bool deferred = flags & kFlagDataDescriptor;
    auto local_ok = [&](uint64_t local, uint64_t central, bool may_be_sentinel) {
      return local == central || (deferred && local == 0) || (may_be_sentinel && local == kU32Sentinel);
    };
    if (!local_ok(crc, e.crc32, false) || !local_ok(compressed, e.size, true) || !local_ok(size, e.size, true))
      throw entry_fail(TorchCheckpointErrc::zip_malformed, e.name,
                       "its local header's CRC or sizes disagree with the central directory");
    e.data_offset = e.header_offset + kLocalBytes + name_len + extra_len;
    if (e.size > cd_offset - e.data_offset)
      throw entry_fail(TorchCheckpointErrc::zip_out_of_bounds, e.name,
                       std::to_string(e.size) + " bytes at byte " + std::to_string(e.data_offset) +
                           " run past the start of the central directory at " + std::to_string(cd_offset));
  }

  // ---- no two entries share bytes (header through data; a descriptor may follow in the gap)
  std::vector<const ZipEntry*> by_offset;
  by_offset.reserve(entries_.size());
  for (const ZipEntry& e : entries_) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const ZipEntry* a, const ZipEntry* b) { return a->header_offset < b->header_offset; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    const ZipEntry& prev = *by_offset[i - 1];
    const ZipEntry& next = *by_offset[i];
    if (next.header_offset < prev.data_offset + prev.size)
      throw fail(TorchCheckpointErrc::zip_overlap,
                 "zip entries " + torch_quote(prev.name) + " and " + torch_quote(next.name) + " share bytes (" +
                     torch_quote(next.name) + " starts at byte " + std::to_string(next.header_offset) + ", inside " +
                     torch_quote(prev.name) + ")");
  }
}

const ZipEntry* TorchZip::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &entries_[it->second];
}

void TorchZip::check_crc(const ZipEntry& e) const {
  const uint32_t actual = crc32_of(data(e));
  if (actual != e.crc32) {
    static const char* hex = "0123456789abcdef";
    auto hex8 = [](uint32_t v) {
      std::string s(8, '0');
      for (int i = 7; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = hex[v & 15];
      return s;
    };
    throw TorchCheckpointError(TorchCheckpointErrc::crc_mismatch,
                               label_ + ": zip entry " + torch_quote(e.name) + ": its bytes have CRC-32 " +
                                   hex8(actual) + " but the archive says " + hex8(e.crc32) + " (a damaged file)");
  }
}

}  // namespace stoke
