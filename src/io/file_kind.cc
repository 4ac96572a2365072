#include "io/file_kind.h"

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"

namespace stoke {

namespace fs = std::filesystem;

namespace {

constexpr size_t kSniffBytes = 4096;

bool starts_with(std::string_view bytes, std::string_view magic) { return bytes.substr(0, magic.size()) == magic; }

uint64_t u64_le(std::string_view b) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(b[static_cast<size_t>(i)]);
  return v;
}

// A safetensors file starts with its JSON header's length (u64, little-endian)
// and the header's '{'. The length must also fit in the file, which text
// never passes (eight ASCII bytes read as a length are past 2^56) — and which
// must be checked before the pickle magic: a header of 640 bytes begins 80 02.
bool looks_like_safetensors(std::string_view b, uintmax_t size) {
  if (b.size() < 10 || b[8] != '{') return false;
  const uint64_t n = u64_le(b);
  return n >= 2 && n <= size - 8;
}

// The first member's name of a zip (its local file header: the name's length
// at byte 26, the name at 30).
std::string_view first_zip_member(std::string_view b) {
  if (b.size() < 30) return {};
  const size_t len = static_cast<uint8_t>(b[26]) | (static_cast<size_t>(static_cast<uint8_t>(b[27])) << 8);
  return b.substr(30, len);
}

bool ends_with(std::string_view s, std::string_view tail) {
  return s.size() >= tail.size() && s.substr(s.size() - tail.size()) == tail;
}

// Valid UTF-8 without NUL bytes. A sequence cut by the end of the sample (not
// of the file) is fine.
bool looks_like_text(std::string_view b, bool whole_file) {
  size_t i = 0;
  while (i < b.size()) {
    const auto c = static_cast<uint8_t>(b[i]);
    if (c == 0) return false;
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    if (len == 0) return false;
    if (i + len > b.size()) return !whole_file;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<uint8_t>(b[i + k]) & 0xC0) != 0x80) return false;
    i += len;
  }
  return true;
}

// Two or more lines, each starting with '{': records, not one JSON document.
bool looks_like_json_lines(std::string_view b) {
  int object_lines = 0;
  size_t start = 0;
  while (start < b.size()) {
    size_t end = b.find('\n', start);
    if (end == std::string_view::npos) break;  // the last line may be cut by the sample
    std::string_view line = b.substr(start, end - start);
    const size_t first = line.find_first_not_of(" \t\r");
    if (first != std::string_view::npos) {
      if (line[first] != '{') return false;
      ++object_lines;
    }
    start = end + 1;
  }
  return object_lines >= 2;
}

std::string first_bytes_hex(std::string_view b) {
  std::string hex;
  for (size_t i = 0; i < b.size() && i < 8; ++i)
    hex += fmt::format("{}{:02x}", i ? " " : "", static_cast<uint8_t>(b[i]));
  return hex;
}

}  // namespace

FileSniff sniff_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(Errc::io, path.string() + ": cannot open: " + std::strerror(errno));
  std::string bytes(kSniffBytes, '\0');
  in.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes.resize(static_cast<size_t>(in.gcount()));
  if (in.bad()) throw Error(Errc::io, path.string() + ": cannot read: " + std::strerror(errno));
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  const bool whole_file = !ec && size == bytes.size();
  const std::string ext = path.extension().string();
  const std::string_view b = bytes;

  if (b.empty()) return {FileKind::empty, "an empty file"};
  if (looks_like_safetensors(b, ec ? b.size() : size)) return {FileKind::safetensors, "a safetensors file"};
  if (starts_with(b, "\x93NUMPY")) return {FileKind::npy, "a NumPy .npy array"};
  if (starts_with(b, "PK\x03\x04") || starts_with(b, "PK\x05\x06")) {
    const std::string_view member = first_zip_member(b);
    if (ends_with(member, ".npy")) return {FileKind::npz, "a NumPy .npz archive (a zip of .npy arrays)"};
    if (ends_with(member, "data.pkl") || member.find("/data/") != std::string_view::npos ||
        ends_with(member, ".pkl"))
      return {FileKind::torch_zip,
              "a PyTorch checkpoint (torch.save's zip of pickles, .pt/.bin): stoke reads one as a model folder's "
              "pytorch_model.bin, with a restricted reader that runs no code; inspect the model folder"};
    return {FileKind::zip, "a zip archive"};
  }
  if (b.size() >= 2 && static_cast<uint8_t>(b[0]) == 0x80 && b[1] >= 2 && b[1] <= 5)
    return {FileKind::pickle,
            "a Python pickle (PyTorch's legacy .bin/.pt format, before PyTorch 1.6): stoke does not read it; re-save "
            "it with a current torch.save, or convert it to safetensors"};
  if (starts_with(b, "GGUF")) return {FileKind::gguf, "a GGUF file (llama.cpp's weights format)"};
  if (starts_with(b, "\x89HDF\r\n\x1a\n"))
    return {FileKind::hdf5, "an HDF5 file (Keras/TensorFlow weights, such as tf_model.h5)"};
  if (ext == ".safetensors") return {FileKind::safetensors, "a safetensors file"};  // its parser says what is wrong
  if (ext == ".onnx") return {FileKind::onnx, "an ONNX model"};
  if (ext == ".msgpack") return {FileKind::msgpack, "a msgpack file (Flax weights, such as flax_model.msgpack)"};
  if (looks_like_text(b, whole_file)) {
    const size_t first = b.find_first_not_of(" \t\r\n");
    const char c = first == std::string_view::npos ? '\0' : b[first];
    if (ext == ".jsonl" || ext == ".ndjson" || (c == '{' && looks_like_json_lines(b)))
      return {FileKind::jsonl, "a JSON Lines file (records, as embed/classify/train read with --input)"};
    if (c == '{' || c == '[') return {FileKind::json, "a JSON file"};
    return {FileKind::text, "a text file"};
  }
  return {FileKind::binary, "binary data of no format inspect knows (first bytes " + first_bytes_hex(b) + ")"};
}

}  // namespace stoke
