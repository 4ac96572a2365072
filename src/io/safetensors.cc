#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>
#include <unordered_set>

#include "core/utf8.h"
#include "io/atomic_file.h"

namespace stoke {

namespace {

// The reference implementation's limit: a header this large is an attack or a bug.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
// Error messages quote names and values from the file; never quote megabytes.
constexpr size_t kMaxQuoted = 120;

Errc broad_code(SafetensorsErrc kind) {
  switch (kind) {
    case SafetensorsErrc::io: return Errc::io;
    case SafetensorsErrc::unknown_dtype: return Errc::unsupported;
    default: return Errc::format;
  }
}

// Cuts s to at most n bytes without splitting a UTF-8 sequence.
std::string_view clip(std::string_view s, size_t n) {
  if (s.size() <= n) return s;
  while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
  return s.substr(0, n);
}

// A name or value from the file as a JSON-style quoted string: control bytes
// (NUL included) are escaped so the message stays one readable line.
std::string quote(std::string_view s) {
  std::string out = "\"";
  std::string_view shown = clip(s, kMaxQuoted);
  for (char c : shown) {
    auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20 || u == 0x7F) {
      static const char* hex = "0123456789abcdef";
      out += "\\u00";
      out += hex[u >> 4];
      out += hex[u & 15];
    } else {
      out += c;
    }
  }
  out += '"';
  if (shown.size() < s.size()) out += "... (" + std::to_string(s.size()) + " bytes)";
  return out;
}

std::string dims_text(const std::vector<uint64_t>& dims) {
  std::string out = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) out += ", ";
    if (i == 16 && dims.size() > 17) {
      out += "... (" + std::to_string(dims.size()) + " dims)";
      break;
    }
    out += std::to_string(dims[i]);
  }
  return out + "]";
}

std::string range_text(uint64_t begin, uint64_t end) {
  std::string out = "[";  // appended piecewise: GCC 12 warns (-Wrestrict) on "[" + to_string
  out += std::to_string(begin);
  out += ", ";
  out += std::to_string(end);
  out += ']';
  return out;
}

uint64_t read_le64(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

// One tensor entry as parsed from the header, before it becomes a StoredTensor.
struct Entry {
  std::string name;
  std::optional<DType> dtype;
  bool has_shape = false;
  bool has_offsets = false;
  std::vector<uint64_t> shape;
  std::vector<uint64_t> offsets;
  uint64_t begin = 0, end = 0;
};

struct Failure {
  SafetensorsErrc kind;
  std::string message;
};

// Streams the header JSON through nlohmann's SAX interface and builds only what
// a valid header can hold (entries and metadata). No DOM: memory stays a small
// multiple of the header size whatever its shape, and a repeated key is seen
// (a DOM keeps the last one silently). The first semantic failure is recorded
// and the rest is only scanned for syntax, so a file that is not JSON at all is
// reported as header_not_json whatever else is wrong with it.
class HeaderSax {
 public:
  using json = nlohmann::json;

  HeaderSax(std::string_view label, uint64_t data_size) : label_(label), data_size_(data_size) {}

  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
  std::optional<Failure> failure;
  std::optional<std::string> syntax_error;

  // ---- nlohmann SAX events ----
  bool null() { return value("null"); }
  bool boolean(bool v) { return value(v ? "true" : "false"); }
  bool number_integer(json::number_integer_t v) {
    if (v >= 0) return unsigned_number(static_cast<uint64_t>(v));
    return value(std::to_string(v));
  }
  bool number_unsigned(json::number_unsigned_t v) { return unsigned_number(v); }
  bool number_float(json::number_float_t, const std::string& text) {
    return value(std::string(clip(text, kMaxQuoted)));
  }
  bool string(std::string& s) {
    if (state_ == State::skip) return true;
    if (state_ == State::metadata) {
      metadata.emplace(std::move(key_), std::move(s));
      return true;
    }
    if (state_ == State::entry && field_ == Field::dtype) {
      Entry& e = entries.back();
      e.dtype = dtype_from_name(s);
      if (!e.dtype)
        fail(SafetensorsErrc::unknown_dtype,
             tensor(e) + "dtype " + quote(s) +
                 " is not supported (expected one of F64, F32, F16, BF16, I64, I32, I16, I8, U8, "
                 "BOOL, U16, U32, U64)");
      return true;
    }
    return value("the string " + quote(s));
  }
  bool binary(json::binary_t&) { return value("binary data"); }

  bool start_object(std::size_t) {
    switch (state_) {
      case State::top: state_ = State::root; return true;
      case State::root:
        if (pending_ == Pending::metadata) {
          state_ = State::metadata;
          return true;
        }
        state_ = State::entry;
        entries.push_back(Entry{});
        entries.back().name = std::move(key_);
        seen_fields_ = 0;
        return true;
      default: return value("an object");
    }
  }
  bool key(std::string& k) {
    switch (state_) {
      case State::root:
        if (!root_keys_.insert(k).second)
          return fail(SafetensorsErrc::duplicate_name,
                      where() + "the key " + quote(k) +
                          " appears twice in the header (names must be unique)");
        if (k == "__metadata__") {
          pending_ = Pending::metadata;
        } else {
          pending_ = Pending::entry;
          if (k.empty())
            return fail(SafetensorsErrc::empty_name,
                        where() + "a tensor has the empty name \"\" (expected a non-empty name)");
          if (k.find('\0') != std::string::npos)
            return fail(
                SafetensorsErrc::nul_in_name,
                where() + "tensor " + quote(k) + ": the name contains a NUL byte (expected none)");
        }
        key_ = std::move(k);
        return true;
      case State::metadata:
        if (metadata.count(k))
          return fail(SafetensorsErrc::duplicate_name, where() + "__metadata__: the key " +
                                                           quote(k) +
                                                           " appears twice (keys must be unique)");
        key_ = std::move(k);
        return true;
      case State::entry: {
        Field f;
        if (k == "dtype")
          f = Field::dtype;
        else if (k == "shape")
          f = Field::shape;
        else if (k == "data_offsets")
          f = Field::offsets;
        else
          return fail(SafetensorsErrc::entry_not_object,
                      tensor(entries.back()) + "unknown key " + quote(k) +
                          " (expected only dtype, shape and data_offsets)");
        unsigned bit = 1u << static_cast<unsigned>(f);
        if (seen_fields_ & bit)
          return fail(SafetensorsErrc::duplicate_name, tensor(entries.back()) + "the key " +
                                                           quote(k) +
                                                           " appears twice (keys must be unique)");
        seen_fields_ |= bit;
        field_ = f;
        return true;
      }
      default: return true;  // skip: keys of objects already reported
    }
  }
  bool end_object() {
    switch (state_) {
      case State::root: state_ = State::done; return true;
      case State::metadata: state_ = State::root; return true;
      case State::entry:
        state_ = State::root;
        finish_entry(entries.back());
        return true;
      default: return true;
    }
  }
  bool start_array(std::size_t) {
    if (state_ == State::entry && field_ == Field::shape) {
      state_ = State::shape;
      entries.back().has_shape = true;
      return true;
    }
    if (state_ == State::entry && field_ == Field::offsets) {
      state_ = State::offsets;
      entries.back().has_offsets = true;
      return true;
    }
    return value("an array");
  }
  bool end_array() {
    if (state_ == State::shape) {
      state_ = State::entry;
    } else if (state_ == State::offsets) {
      state_ = State::entry;
      const Entry& e = entries.back();
      if (e.offsets.size() != 2)
        fail(SafetensorsErrc::bad_offsets, tensor(e) + "data_offsets has " +
                                               std::to_string(e.offsets.size()) +
                                               " values (expected exactly two: [begin, end])");
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& ex) {
    syntax_error = std::string(clip(ex.what(), 300));
    return false;
  }

 private:
  enum class State { top, root, metadata, entry, shape, offsets, done, skip };
  enum class Pending { metadata, entry };
  enum class Field : unsigned { dtype, shape, offsets };

  std::string where() const { return std::string(label_) + ": "; }
  std::string tensor(const Entry& e) const { return where() + "tensor " + quote(e.name) + ": "; }

  bool fail(SafetensorsErrc kind, std::string message) {
    if (!failure) failure = Failure{kind, std::move(message)};
    state_ = State::skip;
    return true;  // keep scanning: a syntax error later still wins
  }

  bool unsigned_number(uint64_t v) {
    if (state_ == State::shape) {
      entries.back().shape.push_back(v);
      return true;
    }
    if (state_ == State::offsets) {
      Entry& e = entries.back();
      if (e.offsets.size() == 2)
        return fail(SafetensorsErrc::bad_offsets,
                    tensor(e) + "data_offsets has more than two values (expected [begin, end])");
      e.offsets.push_back(v);
      return true;
    }
    return value(std::to_string(v));
  }

  // Any value that is not what the current place in the header expects.
  bool value(const std::string& found) {
    switch (state_) {
      case State::top:
        return fail(SafetensorsErrc::header_not_object,
                    where() + "the header is " + found + " (expected a JSON object)");
      case State::root:
        if (pending_ == Pending::metadata)
          return fail(
              SafetensorsErrc::metadata_not_string_map,
              where() + "__metadata__ is " + found + " (expected an object of string values)");
        return fail(SafetensorsErrc::entry_not_object,
                    where() + "tensor " + quote(key_) + ": the entry is " + found +
                        " (expected an object with dtype, shape and data_offsets)");
      case State::metadata:
        return fail(SafetensorsErrc::metadata_not_string_map, where() + "__metadata__: key " +
                                                                  quote(key_) + " holds " + found +
                                                                  " (expected a string)");
      case State::entry: {
        const Entry& e = entries.back();
        switch (field_) {
          case Field::dtype:
            return fail(SafetensorsErrc::bad_dtype_field,
                        tensor(e) + "dtype is " + found + " (expected a string such as \"F32\")");
          case Field::shape:
            return fail(
                SafetensorsErrc::bad_shape,
                tensor(e) + "shape is " + found + " (expected an array of non-negative integers)");
          case Field::offsets:
            return fail(SafetensorsErrc::bad_offsets,
                        tensor(e) + "data_offsets is " + found +
                            " (expected two non-negative integers [begin, end])");
        }
        return true;
      }
      case State::shape: {
        const Entry& e = entries.back();
        return fail(SafetensorsErrc::bad_shape, tensor(e) + "shape[" +
                                                    std::to_string(e.shape.size()) + "] is " +
                                                    found + " (expected a non-negative integer)");
      }
      case State::offsets: {
        const Entry& e = entries.back();
        return fail(SafetensorsErrc::bad_offsets, tensor(e) + "data_offsets[" +
                                                      std::to_string(e.offsets.size()) + "] is " +
                                                      found + " (expected a non-negative integer)");
      }
      default: return true;
    }
  }

  // The checks of one entry that need all of its fields.
  void finish_entry(Entry& e) {
    if (!e.dtype || !e.has_shape || !e.has_offsets) {
      std::string missing;
      for (auto [present, name] :
           {std::pair{e.dtype.has_value(), "dtype"}, std::pair{e.has_shape, "shape"},
            std::pair{e.has_offsets, "data_offsets"}})
        if (!present) missing += std::string(missing.empty() ? "" : ", ") + name;
      fail(SafetensorsErrc::missing_field,
           tensor(e) + "missing " + missing + " (an entry needs dtype, shape and data_offsets)");
      return;
    }
    // Byte size. Zero dims are skipped in the product so that a shape like
    // [0, 2^40, 2^40] is still refused: later stride arithmetic must not overflow.
    const uint64_t elem = dtype_size(*e.dtype);
    uint64_t bytes = elem;
    bool empty = false;
    for (uint64_t d : e.shape) {
      if (d == 0) {
        empty = true;
        continue;
      }
      if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(bytes, d, &bytes)) {
        fail(SafetensorsErrc::shape_overflow,
             tensor(e) + "shape " + dims_text(e.shape) + " of " +
                 std::string(dtype_name(*e.dtype)) +
                 " needs more than 2^64 bytes (expected a size that fits 64 bits)");
        return;
      }
    }
    if (empty) bytes = 0;
    e.begin = e.offsets[0];
    e.end = e.offsets[1];
    if (e.begin > e.end) {
      fail(SafetensorsErrc::offsets_reversed, tensor(e) + "data_offsets " +
                                                  range_text(e.begin, e.end) +
                                                  " are reversed (expected begin <= end)");
      return;
    }
    if (e.end > data_size_) {
      fail(SafetensorsErrc::offsets_out_of_range,
           tensor(e) + "data_offsets " + range_text(e.begin, e.end) +
               " end past the data section of " + std::to_string(data_size_) + " bytes");
      return;
    }
    if (e.end - e.begin != bytes) {
      fail(SafetensorsErrc::size_mismatch,
           tensor(e) + "data_offsets " + range_text(e.begin, e.end) + " hold " +
               std::to_string(e.end - e.begin) + " bytes but shape " + dims_text(e.shape) + " of " +
               std::string(dtype_name(*e.dtype)) + " needs " + std::to_string(bytes));
      return;
    }
  }

  std::string_view label_;
  uint64_t data_size_;
  State state_ = State::top;
  Pending pending_ = Pending::entry;
  Field field_ = Field::dtype;
  unsigned seen_fields_ = 0;
  std::string key_;
  std::unordered_set<std::string> root_keys_;
};

[[noreturn]] void throw_io(const std::filesystem::path& path, const char* step) {
  throw SafetensorsError(SafetensorsErrc::io,
                         path.string() + ": " + step + " failed: " + std::strerror(errno));
}

}  // namespace

const char* safetensors_errc_name(SafetensorsErrc e) {
  switch (e) {
#define STOKE_ST_CASE(x) \
  case SafetensorsErrc::x: return #x;
    STOKE_ST_CASE(header_too_short)
    STOKE_ST_CASE(header_too_large)
    STOKE_ST_CASE(header_out_of_bounds)
    STOKE_ST_CASE(header_not_utf8)
    STOKE_ST_CASE(header_not_json)
    STOKE_ST_CASE(header_not_object)
    STOKE_ST_CASE(metadata_not_string_map)
    STOKE_ST_CASE(entry_not_object)
    STOKE_ST_CASE(missing_field)
    STOKE_ST_CASE(bad_dtype_field)
    STOKE_ST_CASE(unknown_dtype)
    STOKE_ST_CASE(bad_shape)
    STOKE_ST_CASE(shape_overflow)
    STOKE_ST_CASE(bad_offsets)
    STOKE_ST_CASE(offsets_reversed)
    STOKE_ST_CASE(offsets_out_of_range)
    STOKE_ST_CASE(offsets_overlap)
    STOKE_ST_CASE(data_hole)
    STOKE_ST_CASE(size_mismatch)
    STOKE_ST_CASE(trailing_bytes)
    STOKE_ST_CASE(duplicate_name)
    STOKE_ST_CASE(nul_in_name)
    STOKE_ST_CASE(empty_name)
    STOKE_ST_CASE(io)
#undef STOKE_ST_CASE
  }
  return "unknown";
}

SafetensorsError::SafetensorsError(SafetensorsErrc kind, const std::string& message)
    : Error(broad_code(kind), message), kind_(kind) {}

int64_t StoredTensor::numel() const {
  // The reader checked that the product fits (it equals the byte size / dtype size).
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->path_ = path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw_io(path, "open");
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    int saved = errno;
    ::close(fd);
    errno = saved;
    throw_io(path, "stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    throw SafetensorsError(SafetensorsErrc::io, path.string() + ": not a regular file");
  }
  f->size_ = static_cast<uint64_t>(st.st_size);
  // mmap of length 0 is an error; such a file fails the length check in parse().
  if (f->size_ >= 8) {
    void* m = ::mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      int saved = errno;
      ::close(fd);
      errno = saved;
      throw_io(path, "mmap");
    }
    f->mapping_ = m;
    f->base_ = static_cast<const std::byte*>(m);
  }
  ::close(fd);  // the mapping keeps the file's pages alive
  // Note: a file truncated by another process while mapped raises SIGBUS on
  // access; stoke does not guard against concurrent writers of its inputs.
  f->parse(path.string());
  return f;
}

std::shared_ptr<SafetensorsFile> SafetensorsFile::from_bytes(std::span<const std::byte> bytes,
                                                             std::string label) {
  std::shared_ptr<SafetensorsFile> f(new SafetensorsFile());
  f->owned_.assign(bytes.begin(), bytes.end());
  f->base_ = f->owned_.data();
  f->size_ = f->owned_.size();
  f->parse(label);
  return f;
}

SafetensorsFile::~SafetensorsFile() {
  if (mapping_) ::munmap(mapping_, size_);
}

const StoredTensor* SafetensorsFile::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void SafetensorsFile::parse(std::string_view label) {
  const std::string who(label);
  auto error = [&](SafetensorsErrc kind, const std::string& what) {
    return SafetensorsError(kind, who + ": " + what);
  };
  if (size_ < 8)
    throw error(
        SafetensorsErrc::header_too_short,
        "file is " + std::to_string(size_) + " bytes (expected at least 8 for the header length)");
  const uint64_t n = read_le64(base_);
  if (n > kMaxHeaderBytes)
    throw error(SafetensorsErrc::header_too_large, "header length is " + std::to_string(n) +
                                                       " bytes (limit " +
                                                       std::to_string(kMaxHeaderBytes) + ")");
  if (8 + n > size_)
    throw error(SafetensorsErrc::header_out_of_bounds,
                "header length " + std::to_string(n) + " needs " + std::to_string(8 + n) +
                    " bytes but the file has " + std::to_string(size_));
  const std::string_view header(reinterpret_cast<const char*>(base_ + 8), n);
  if (!utf8_is_valid(header))
    throw error(SafetensorsErrc::header_not_utf8, "header is not valid UTF-8");

  // JSON never holds a raw NUL (inside strings it must be escaped), and
  // nlohmann's lexer takes one as the end of input: without this check
  // "{}\0<anything>" would pass as the header "{}".
  if (size_t nul = header.find('\0'); nul != std::string_view::npos)
    throw error(SafetensorsErrc::header_not_json,
                "header is not JSON: raw NUL byte at header offset " + std::to_string(nul));

  const uint64_t data_size = size_ - 8 - n;
  HeaderSax sax(label, data_size);
  nlohmann::json::sax_parse(header.begin(), header.end(), &sax,
                            nlohmann::json::input_format_t::json,
                            /*strict=*/true);
  if (sax.syntax_error)
    throw error(SafetensorsErrc::header_not_json, "header is not JSON: " + *sax.syntax_error);
  if (sax.failure) throw SafetensorsError(sax.failure->kind, sax.failure->message);

  // Cross-tensor checks: sorted by position the tensors must tile the data
  // section exactly. Zero-size tensors may sit at any tensor boundary.
  std::vector<Entry>& entries = sax.entries;
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    if (a.begin != b.begin) return a.begin < b.begin;
    if (a.end != b.end) return a.end < b.end;
    return a.name < b.name;
  });
  uint64_t cursor = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    if (e.begin < cursor)
      throw error(SafetensorsErrc::offsets_overlap,
                  "tensor " + quote(e.name) + " at " + range_text(e.begin, e.end) +
                      " overlaps tensor " + quote(prev->name) + " at " +
                      range_text(prev->begin, prev->end));
    if (e.begin > cursor)
      throw error(SafetensorsErrc::data_hole,
                  "bytes " + range_text(cursor, e.begin) + " belong to no tensor (" +
                      (prev ? "between tensor " + quote(prev->name) + " and " : "before ") +
                      "tensor " + quote(e.name) + ")");
    cursor = e.end;
    prev = &e;
  }
  if (cursor != data_size)
    throw error(SafetensorsErrc::trailing_bytes,
                std::to_string(data_size - cursor) +
                    " bytes after the last tensor's data (data section is " +
                    std::to_string(data_size) + " bytes, tensors end at " + std::to_string(cursor) +
                    ")");

  const std::byte* data = base_ + 8 + n;
  tensors_.reserve(entries.size());
  for (Entry& e : entries) {
    StoredTensor v;
    v.name = std::move(e.name);
    v.dtype = *e.dtype;
    v.shape.assign(e.shape.begin(), e.shape.end());  // each dim <= INT64_MAX, checked
    v.data = std::span<const std::byte>(data + e.begin, e.end - e.begin);
    index_.emplace(v.name, tensors_.size());
    tensors_.push_back(std::move(v));
  }
  metadata_ = std::move(sax.metadata);
}

// ---- writer --------------------------------------------------------------

std::vector<std::byte> serialize_safetensors(const std::vector<TensorToWrite>& tensors,
                                             const std::map<std::string, std::string>& metadata) {
  auto invalid = [](const std::string& what) {
    return Error(Errc::invalid_argument, "safetensors writer: " + what);
  };
  std::vector<const TensorToWrite*> order;
  order.reserve(tensors.size());
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });

  // Refuse what the reader would refuse, so every file we write reads back.
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorToWrite& t = *order[i];
    if (t.name.empty()) throw invalid("a tensor has the empty name");
    if (t.name == "__metadata__") throw invalid("a tensor may not be named \"__metadata__\"");
    if (t.name.find('\0') != std::string::npos)
      throw invalid("tensor " + quote(t.name) + ": name contains NUL");
    if (!utf8_is_valid(t.name))
      throw invalid("tensor " + quote(t.name) + ": name is not valid UTF-8");
    if (i > 0 && order[i - 1]->name == t.name)
      throw invalid("tensor " + quote(t.name) + " given twice");
  }
  for (const auto& [k, v] : metadata)
    if (!utf8_is_valid(k) || !utf8_is_valid(v))
      throw invalid("__metadata__ key " + quote(k) + ": key or value is not valid UTF-8");

  auto json_string = [](const std::string& s) { return nlohmann::json(s).dump(); };
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      if (!first) header += ',';
      first = false;
      header += json_string(k) + ':' + json_string(v);
    }
    header += '}';
  }
  uint64_t offset = 0;
  for (size_t i = 0; i < order.size(); ++i) {
    const TensorToWrite& t = *order[i];
    uint64_t bytes = dtype_size(t.dtype);
    bool empty = false;
    std::string shape = "[";
    for (size_t j = 0; j < t.shape.size(); ++j) {
      int64_t d = t.shape[j];
      if (d < 0)
        throw invalid("tensor " + quote(t.name) + ": negative dimension " + std::to_string(d));
      if (j) shape += ',';
      shape += std::to_string(d);
      if (d == 0) {
        empty = true;
        continue;
      }
      if (__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes))
        throw invalid("tensor " + quote(t.name) + ": shape overflows 64 bits");
    }
    shape += ']';
    if (empty) bytes = 0;
    if (t.data.size() != bytes)
      throw invalid("tensor " + quote(t.name) + ": data holds " + std::to_string(t.data.size()) +
                    " bytes but shape " + shape + " of " + std::string(dtype_name(t.dtype)) +
                    " needs " + std::to_string(bytes));
    if (header.size() > 1) header += ',';
    header += json_string(t.name) + ":{\"dtype\":\"" + std::string(dtype_name(t.dtype)) +
              "\",\"shape\":" + shape + ",\"data_offsets\":[" + std::to_string(offset) + ',' +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += '}';
  // Pad so the data section starts 8-byte aligned (the reference writer does too).
  while (header.size() % 8 != 0) header += ' ';

  std::vector<std::byte> out;
  out.reserve(8 + header.size() + offset);
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((n >> (8 * i)) & 0xFF));
  const auto* h = reinterpret_cast<const std::byte*>(header.data());
  out.insert(out.end(), h, h + header.size());
  for (const TensorToWrite* t : order) out.insert(out.end(), t->data.begin(), t->data.end());
  return out;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace stoke
