// The rows of finished batches that no shard holds yet (docs/output-format.md
// "Unfinished windows"): a stop or a kill loses at most the batches being
// computed, whatever --sort-window is. A window's rows reach a shard only
// once every batch of the window is done (the writer restores input order),
// and a shard commits only when it is full, so without this a kill threw
// away every finished batch since the last commit.
//
// Each sort window [first, first + sort_window) has one file,
// partial-<first, 12 digits>.rows, to which the writer appends each batch the
// moment its results arrive: a header (the run's identity, the row width, the
// window), then per batch its ordinal in the window, its records' numbers,
// its rows (f32, as computed) and a SHA-256 over the entry. Appends are
// write(2)s: a killed process's writes are in the page cache and survive it;
// they are fsync'd at most a second apart and when the run stops, so a
// machine's crash loses at most the last second. A window's file goes once a
// committed manifest covers the whole window (forget_before).
//
// On resume the entries that are whole and belong to this run (same identity
// and width) are kept; a torn last entry is cut off; a file of another run is
// removed. The pipeline forms each window's batches exactly as before
// (bucketer.h) and takes a batch's rows from here when its ordinal and records
// match, so the output stays byte-identical to an uninterrupted run.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace stoke {

// partial-000000065536.rows: the window's first record number.
std::string partial_rows_file_name(uint64_t window_first);
bool is_partial_rows_name(const std::filesystem::path& path);

class BatchJournal {
 public:
  // Reads what earlier runs kept in `dir` for this run (`identity`: a digest
  // of everything that fixes the rows; `width`: floats per row). Throws
  // Error(io) when a file cannot be read or cut.
  BatchJournal(std::filesystem::path dir, std::string identity, int64_t width, uint64_t sort_window);
  ~BatchJournal();
  BatchJournal(const BatchJournal&) = delete;
  BatchJournal& operator=(const BatchJournal&) = delete;

  // The rows an earlier run kept for batch `ordinal` of the window starting
  // at `window_first`, when it held exactly `records`: written to `out`
  // (records.size() x width). False when there are none.
  bool lookup(uint64_t window_first, uint32_t ordinal, std::span<const uint64_t> records, float* out) const;
  // Keeps a finished batch's rows (records.size() x width, in batch order).
  void record(uint64_t window_first, uint32_t ordinal, std::span<const uint64_t> records, const float* rows);
  // Makes every kept row durable (a stop, the end of a run).
  void sync();
  // Committed shards now hold every record before `records`: the files of
  // windows that end at or before it go.
  void forget_before(uint64_t records);
  // Every file goes (the output is complete).
  void forget_all();

  // Rows kept (by earlier runs and this one) for records at or after `records`.
  uint64_t rows_kept_from(uint64_t records) const;
  // Rows found at the start, kept by earlier runs.
  uint64_t rows_found() const { return rows_found_; }
  // Files of other runs or torn entries found and removed at the start, in words ("" when none).
  const std::string& cleanup_note() const { return cleanup_note_; }

 private:
  struct Entry {
    std::filesystem::path file;
    uint64_t rows_offset = 0;
    std::vector<uint64_t> records;
  };
  struct OpenFile {
    int fd = -1;
    bool dirty = false;
  };
  void load();
  void load_file(const std::filesystem::path& path, uint64_t window_first);
  OpenFile& file_for(uint64_t window_first);
  void close_and_remove(uint64_t window_first);

  std::filesystem::path dir_;
  std::string identity_;
  int64_t width_;
  uint64_t sort_window_;
  mutable std::mutex mu_;
  std::map<std::pair<uint64_t, uint32_t>, Entry> entries_;  // (window first, ordinal)
  std::map<uint64_t, OpenFile> open_;                        // by window first
  std::map<uint64_t, std::vector<uint64_t>> kept_records_;   // every record kept, per window
  uint64_t rows_found_ = 0;
  std::string cleanup_note_;
  double last_sync_ = 0;
  std::vector<std::byte> buffer_;
};

}  // namespace stoke
