#include "io/npy.h"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"
#include "io/atomic_file.h"

namespace stoke {

const char* npy_descr(DType dtype) {
  switch (dtype) {
    case DType::f32: return "<f4";
    case DType::f16: return "<f2";
    case DType::i32: return "<i4";
    case DType::i64: return "<i8";
    default: return nullptr;
  }
}

std::string npy_header(DType dtype, std::span<const int64_t> shape, size_t min_bytes) {
  const char* descr = npy_descr(dtype);
  if (!descr) throw Error(Errc::invalid_argument, "npy: only float32, float16, int32 and int64 arrays are written");
  // numpy's spelling of a shape tuple: "(n,)" for one dimension, "(a, b)" otherwise.
  std::string dims;
  for (size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string dict = std::string("{'descr': '") + descr + "', 'fortran_order': False, 'shape': (" + dims + "), }";
  // magic (6) + version (2) + length (2) + dict + padding + '\n' = multiple of 64,
  // so the data is aligned for memory mapping.
  const size_t unpadded = 10 + dict.size() + 1;
  size_t padding = (64 - unpadded % 64) % 64;
  if (unpadded + padding < min_bytes) padding += (min_bytes - unpadded - padding + 63) / 64 * 64;
  if (10 + dict.size() + padding + 1 > 65535) throw Error(Errc::internal, "npy: header too long");
  dict.append(padding, ' ');
  dict.push_back('\n');
  std::string header("\x93NUMPY\x01\x00", 8);
  const uint16_t len = static_cast<uint16_t>(dict.size());
  header.push_back(static_cast<char>(len & 0xFF));
  header.push_back(static_cast<char>(len >> 8));
  return header + dict;
}

std::string npy_header(DType dtype, int64_t rows, int64_t cols, size_t min_bytes) {
  if (dtype != DType::f32 && dtype != DType::f16)
    throw Error(Errc::invalid_argument, "npy: only float32 and float16 arrays are written");
  const int64_t shape[] = {rows, cols};
  return npy_header(dtype, shape, min_bytes);
}

void write_npy(const std::filesystem::path& path, DType dtype, int64_t rows, int64_t cols,
               std::span<const std::byte> data) {
  const size_t expected = static_cast<size_t>(rows * cols) * dtype_size(dtype);
  if (data.size() != expected)
    throw Error(Errc::internal, "npy: " + std::to_string(data.size()) + " bytes for a " + std::to_string(rows) + "x" +
                                    std::to_string(cols) + " array");
  const std::string header = npy_header(dtype, rows, cols);
  std::vector<std::byte> bytes(header.size() + data.size());
  std::memcpy(bytes.data(), header.data(), header.size());
  if (!data.empty()) std::memcpy(bytes.data() + header.size(), data.data(), data.size());
  write_file_atomic(path, bytes);
}

namespace {

[[noreturn]] void bad_header(const std::string& what) { throw Error(Errc::format, "npy header: " + what); }

// A cursor over the header dict, which is a Python literal: {'key': value, ...}.
// Only what numpy writes is accepted: quoted strings, True/False, tuples of
// non-negative integers (a one-element tuple needs its trailing comma).
class DictParser {
 public:
  explicit DictParser(std::string_view s) : s_(s) {}

  void skip_spaces() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t')) ++pos_;
  }
  bool eat(char c) {
    skip_spaces();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c, const std::string& where) {
    if (!eat(c)) bad_header(std::string("expected '") + c + "' " + where + " at byte " + std::to_string(pos_) + " of the dict");
  }
  bool at_string() {
    skip_spaces();
    return pos_ < s_.size() && (s_[pos_] == '\'' || s_[pos_] == '"');
  }
  std::string string() {
    if (!at_string()) bad_header("expected a quoted string at byte " + std::to_string(pos_) + " of the dict");
    const char quote = s_[pos_++];
    const size_t end = s_.find(quote, pos_);
    if (end == std::string_view::npos) bad_header("unterminated string");
    std::string out(s_.substr(pos_, end - pos_));
    if (out.find('\\') != std::string::npos) bad_header("escapes in strings are not accepted");
    pos_ = end + 1;
    return out;
  }
  bool boolean() {
    skip_spaces();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, std::pair{std::string_view("False"), false}}) {
      if (s_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    bad_header("fortran_order must be True or False");
  }
  int64_t integer() {
    skip_spaces();
    const size_t start = pos_;
    int64_t v = 0;
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      if (v > (INT64_MAX - 9) / 10) bad_header("a shape dimension is too large");
      v = v * 10 + (s_[pos_++] - '0');
    }
    if (pos_ == start) bad_header("expected a non-negative integer in shape at byte " + std::to_string(pos_) + " of the dict");
    return v;
  }
  std::vector<int64_t> tuple() {
    expect('(', "to open shape");
    std::vector<int64_t> dims;
    bool trailing_comma = false;
    while (!eat(')')) {
      dims.push_back(integer());
      trailing_comma = eat(',');
      if (!trailing_comma) {
        expect(')', "to close shape");
        break;
      }
    }
    if (dims.size() == 1 && !trailing_comma) bad_header("a one-dimensional shape needs its comma: (n,)");
    return dims;
  }
  size_t pos() const { return pos_; }
  size_t size() const { return s_.size(); }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

NpyHeader parse_npy_header(std::string_view bytes) {
  if (bytes.size() < 10 || bytes.substr(0, 6) != std::string_view("\x93NUMPY", 6)) bad_header("no .npy magic (\\x93NUMPY)");
  NpyHeader h;
  h.major_version = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if (h.major_version < 1 || h.major_version > 3 || minor != 0)
    bad_header("version " + std::to_string(h.major_version) + "." + std::to_string(minor) + " (1.0, 2.0 or 3.0 expected)");
  size_t len = 0, prefix = 0;
  if (h.major_version == 1) {
    len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
    prefix = 10;
  } else {
    if (bytes.size() < 12) bad_header("truncated before the header length");
    for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[8 + i]);
    prefix = 12;
  }
  if (bytes.size() < prefix + len)
    bad_header("the header says it is " + std::to_string(len) + " bytes long but only " +
               std::to_string(bytes.size() - prefix) + " follow");
  h.data_offset = prefix + len;
  std::string_view dict = bytes.substr(prefix, len);
  if (dict.empty() || dict.back() != '\n') bad_header("does not end with a newline");
  dict.remove_suffix(1);
  while (!dict.empty() && dict.back() == ' ') dict.remove_suffix(1);  // padding

  DictParser p(dict);
  p.expect('{', "to open the dict");
  bool have_descr = false, have_order = false, have_shape = false;
  while (!p.eat('}')) {
    const std::string key = p.string();
    p.expect(':', "after key '" + key + "'");
    if (key == "descr" && !have_descr) {
      if (!p.at_string()) bad_header("descr is not a simple dtype string (structured arrays are not read)");
      h.descr = p.string();
      have_descr = true;
    } else if (key == "fortran_order" && !have_order) {
      h.fortran_order = p.boolean();
      have_order = true;
    } else if (key == "shape" && !have_shape) {
      h.shape = p.tuple();
      have_shape = true;
    } else {
      bad_header("unexpected or repeated key '" + key + "'");
    }
    if (!p.eat(',')) {
      p.expect('}', "to close the dict");
      break;
    }
  }
  p.skip_spaces();
  if (p.pos() != p.size()) bad_header("unexpected text after the dict");
  if (!have_descr || !have_order || !have_shape) bad_header("needs the keys 'descr', 'fortran_order' and 'shape'");
  return h;
}

NpyHeader read_npy_header(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) throw Error(Errc::not_found, path.string() + ": no such file");
    throw Error(Errc::io, path.string() + ": cannot open: " + std::strerror(errno));
  }
  std::string bytes(12, '\0');
  in.read(bytes.data(), 12);
  bytes.resize(static_cast<size_t>(in.gcount()));
  try {
    // Lengths come from the first 12 bytes; read just the header after them.
    size_t len = 0;
    if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) {
      len = 0;  // not a .npy file: parse_npy_header says so
    } else if (bytes[6] == 1) {
      len = static_cast<uint8_t>(bytes[8]) | (static_cast<size_t>(static_cast<uint8_t>(bytes[9])) << 8);
      len += 10;
    } else if (bytes.size() >= 12) {
      for (int i = 3; i >= 0; --i) len = (len << 8) | static_cast<uint8_t>(bytes[8 + i]);
      if (len > (size_t{1} << 24)) bad_header("header length " + std::to_string(len) + " is implausible");
      len += 12;
    }
    if (len > bytes.size()) {
      const size_t have = bytes.size();
      bytes.resize(len);
      in.read(bytes.data() + have, static_cast<std::streamsize>(len - have));
      bytes.resize(have + static_cast<size_t>(in.gcount()));
    }
    return parse_npy_header(bytes);
  } catch (const Error& e) {
    throw Error(e.code(), path.string() + ": " + e.what());
  }
}

size_t npy_descr_itemsize(std::string_view descr) {
  if (descr.size() < 3 || (descr[0] != '<' && descr[0] != '>' && descr[0] != '|' && descr[0] != '=')) return 0;
  const char kind = descr[1];
  if (kind != 'f' && kind != 'i' && kind != 'u' && kind != 'b') return 0;
  size_t n = 0;
  for (char c : descr.substr(2)) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + static_cast<size_t>(c - '0');
  }
  return n;
}

int64_t NpyArray::numel() const {
  int64_t n = 1;
  for (int64_t d : header.shape) n *= d;
  return n;
}

NpyArray read_npy(const std::filesystem::path& path) {
  NpyArray a;
  a.header = read_npy_header(path);
  const std::string label = path.string();
  if (a.header.fortran_order) throw Error(Errc::format, label + ": Fortran-order arrays are not read");
  const size_t item = npy_descr_itemsize(a.header.descr);
  if (item == 0) throw Error(Errc::format, label + ": unknown dtype '" + a.header.descr + "'");
  // The element count, checked against the file before anything is allocated.
  std::error_code ec;
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  if (ec) throw Error(Errc::io, label + ": cannot stat: " + ec.message());
  const uint64_t room = file_size - std::min<uint64_t>(file_size, a.header.data_offset);
  uint64_t numel = 1;
  bool overflow = false;
  for (int64_t d : a.header.shape) {
    const auto u = static_cast<uint64_t>(d);
    if (u == 0) {
      numel = 0;
      overflow = false;
      break;
    }
    if (numel > UINT64_MAX / u) overflow = true;
    else numel *= u;
  }
  if (overflow || numel > room / item)
    throw Error(Errc::format, label + ": the header's shape needs more data than the file's " + std::to_string(room) +
                                  " bytes after the header");
  if (numel * item != room)
    throw Error(Errc::format, label + ": the header's shape needs " + std::to_string(numel * item) +
                                  " data bytes, the file has " + std::to_string(room) + " after the header");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, label + ": cannot open: " + std::strerror(errno));
  in.seekg(static_cast<std::streamoff>(a.header.data_offset));
  a.data.resize(static_cast<size_t>(room));
  in.read(reinterpret_cast<char*>(a.data.data()), static_cast<std::streamsize>(room));
  if (static_cast<uint64_t>(in.gcount()) != room) throw Error(Errc::io, label + ": short read");
  return a;
}

}  // namespace stoke
