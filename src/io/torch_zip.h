// A strict reader of the zip container torch.save writes (PyTorch >= 1.6:
// `pytorch_model.bin`, `*.pt`): every entry STORED, data records aligned to
// 64 bytes by padding in the local header's extra field, zip64 end records
// always present, sizes in the central directory (torch's writer sets flag 3
// and leaves the local header's sizes zero).
//
// Zero-copy: the archive is a span the caller keeps alive (a MappedFile) and
// entries are spans into it. Nothing is inflated, so no entry can claim more
// memory than the file holds: a compressed entry is refused by name (torch
// never compresses), which refuses zip bombs by construction.
//
// Refused (TorchCheckpointError, naming the entry): no end record (not_zip);
// an offset or size past the file or into the central directory
// (zip_out_of_bounds); bad signatures, multi-disk or encrypted archives, zip64
// records that disagree with the 32-bit ones, local headers that disagree with
// the central directory (zip_malformed); entries that are not STORED
// (zip_compressed); empty, absolute, "..", backslash, NUL, non-UTF-8 or
// directory names (zip_bad_name); a name twice (zip_duplicate_name); two entries
// sharing bytes (zip_overlap); more than kMaxZipEntries entries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/torch_checkpoint_error.h"

namespace stoke {

// One record per storage plus six small ones: a million is far past any
// model (BERT-large has ~400 tensors) and keeps the central directory's
// parse bounded whatever its header claims.
constexpr uint64_t kMaxZipEntries = 1u << 20;

struct ZipEntry {
  std::string name;
  uint64_t header_offset = 0;  // the local file header
  uint64_t data_offset = 0;    // the first byte of the stored data
  uint64_t size = 0;           // bytes of data (stored: compressed size == uncompressed size)
  uint32_t crc32 = 0;          // as the central directory gives it
};

class TorchZip {
 public:
  // Parses and validates the archive; `bytes` must outlive this object.
  TorchZip(std::span<const std::byte> bytes, std::string label);

  const std::string& label() const { return label_; }
  const std::vector<ZipEntry>& entries() const { return entries_; }  // central-directory order
  const ZipEntry* find(std::string_view name) const;                 // nullptr when absent
  std::span<const std::byte> data(const ZipEntry& e) const { return bytes_.subspan(e.data_offset, e.size); }
  // Throws TorchCheckpointError(crc_mismatch) when e's bytes do not match its CRC-32.
  void check_crc(const ZipEntry& e) const;

 private:
  std::span<const std::byte> bytes_;
  std::string label_;
  std::vector<ZipEntry> entries_;
  std::map<std::string, size_t, std::less<>> index_;
};

// CRC-32 (ISO-HDLC, as zip uses), one byte at a time: only small records are checked.
uint32_t crc32_of(std::span<const std::byte> bytes);

}  // namespace stoke
