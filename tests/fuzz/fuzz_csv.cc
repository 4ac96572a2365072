// CSV/TSV bytes -> RecordReader. The first byte picks the variant (bit 0: TSV,
// bit 1: an id column is asked for, bits 2-4: the most bytes one read returns);
// the rest is the input. Any bytes must give a clear stoke::Error at the header
// or records such that: texts are valid UTF-8, reading through a 1-byte buffer
// with short reads gives the same records as one big buffer, skip() counts the
// same records, and the fingerprint is the SHA-256 of the input.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/sha256.h"
#include "core/utf8.h"
#include "pipeline/record_reader.h"

namespace {

using namespace stoke;

std::string flatten(const InputRecord& r) {
  std::string s = std::to_string(r.index) + "/" + std::to_string(r.line) + "/" + r.text + "/" +
                  (r.pair ? "P" + *r.pair : "-") + "/" + r.id_json + "/" + std::to_string(r.replaced_utf8) + "/" +
                  r.error;
  return s;
}

// Returns false when the header is refused (a stoke::Error: fine).
bool read_all(const std::string& input, const RecordReaderOptions& o, size_t buffer, size_t max_read,
              std::vector<std::string>& out, std::string& sha) {
  try {
    RecordReader r(o, memory_byte_source(input, max_read), "fuzz", input.size(), buffer);
    InputRecord rec;
    while (r.next(rec)) {
      if (rec.error.empty() && (!utf8_is_valid(rec.text) || (rec.pair && !utf8_is_valid(*rec.pair)))) std::abort();
      if (!rec.error.empty() && !rec.text.empty()) std::abort();
      if (rec.index != out.size()) std::abort();
      out.push_back(flatten(rec));
    }
    if (r.records() != out.size() || r.bytes_read() != input.size()) std::abort();
    sha = r.sha256_so_far();
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t flags = data[0];
  const std::string input(reinterpret_cast<const char*>(data) + 1, size - 1);
  RecordReaderOptions o;
  o.format = (flags & 1) ? InputFormat::tsv : InputFormat::csv;
  o.pair_field = "p";
  if (flags & 2) o.id_field = "id";
  const size_t max_read = 1 + ((flags >> 2) & 7);

  std::vector<std::string> big, small;
  std::string sha_big, sha_small;
  // 64 KiB rather than the default 1 MiB: the same code, many more runs a second.
  const bool ok = read_all(input, o, 65536, SIZE_MAX, big, sha_big);
  if (read_all(input, o, 1, max_read, small, sha_small) != ok) std::abort();
  if (!ok) return 0;
  if (big != small) std::abort();
  if (sha_big != sha_small || sha_big != sha256_hex(input)) std::abort();

  // skip(k) then next() gives record k.
  const uint64_t k = big.empty() ? 0 : (flags >> 5) % (big.size() + 1);
  RecordReader r(o, memory_byte_source(input, max_read), "fuzz", input.size(), 2);
  if (r.skip(k) != k) std::abort();
  InputRecord rec;
  const bool more = r.next(rec);
  if (more != (k < big.size())) std::abort();
  if (more && flatten(rec) != big[k]) std::abort();
  return 0;
}
