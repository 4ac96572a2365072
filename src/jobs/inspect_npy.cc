// `stoke inspect FILE.npy`: the header as numpy.load reads it, and whether the
// file holds exactly the bytes the header promises (a truncated shard, or one
// with bytes after its data, is what an interrupted copy leaves).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "io/npy.h"
#include "jobs/inspect_parts.h"

namespace stoke::inspect {

namespace fs = std::filesystem;

namespace {

// numpy's name for a descr: "<f4" -> "float32"; "" when inspect does not know it.
std::string dtype_of(const std::string& descr) {
  if (descr.size() < 2) return "";
  static const std::pair<const char*, const char*> kNames[] = {
      {"f2", "float16"}, {"f4", "float32"}, {"f8", "float64"}, {"i1", "int8"},   {"i2", "int16"},
      {"i4", "int32"},   {"i8", "int64"},   {"u1", "uint8"},   {"u2", "uint16"}, {"u4", "uint32"},
      {"u8", "uint64"},  {"b1", "bool"},    {"c8", "complex64"}, {"c16", "complex128"}};
  const std::string code = descr.substr(1);
  for (const auto& [c, name] : kNames)
    if (code == c) return std::string(name) + (descr[0] == '>' ? ", big-endian" : "");
  if (code == "O") return "object (pickled Python objects; numpy.load needs allow_pickle)";
  return "";
}

// A .npy inside an embed output folder: which shard the manifest says it is.
std::string shard_note(const fs::path& path, const std::vector<int64_t>& shape) {
  const fs::path manifest = path.parent_path() / "manifest.json";
  std::error_code ec;
  if (!fs::is_regular_file(manifest, ec) || fs::file_size(manifest, ec) > (uint64_t{1} << 30)) return "";
  const nlohmann::json m = nlohmann::json::parse(read_file(manifest), nullptr, false);
  if (!m.is_object() || m.value("format", nlohmann::json()) != "stoke-embeddings" || !m.contains("shards") ||
      !m["shards"].is_array())
    return "";
  const std::string name = path.filename().string();
  auto scalar = [](const nlohmann::json& v) { return v.is_primitive() ? v.dump() : std::string("?"); };
  for (const auto& s : m["shards"]) {
    if (!s.is_object() || s.value("embeddings", nlohmann::json()) != name) continue;
    const auto rows = s.value("rows", nlohmann::json());
    const auto dims = m.value("dimensions", nlohmann::json());
    std::string agrees;
    if (rows.is_number_integer() && dims.is_number_integer())
      agrees = shape.size() == 2 && shape[0] == rows.get<int64_t>() && shape[1] == dims.get<int64_t>()
                   ? ", as the header says"
                   : fmt::format(", but the header says {}", shape_text(shape));
    return fmt::format("in: embed output folder {} (shard {}: the manifest says {} rows of {} dims{}); stoke inspect "
                       "{} describes it",
                       path.parent_path().string(), scalar(s.value("index", nlohmann::json())), scalar(rows),
                       scalar(dims), agrees, path.parent_path().string());
  }
  return "in: folder " + path.parent_path().string() + ", whose manifest.json does not name this file (not committed)";
}

}  // namespace

void npy_file(const fs::path& path, std::ostream& out) {
  const NpyHeader h = read_npy_header(path);
  std::error_code ec;
  const uint64_t file_size = fs::file_size(path, ec);
  if (ec) throw Error(Errc::io, path.string() + ": cannot read its size: " + ec.message());
  uint64_t elements = 1;
  bool overflow = false;
  for (int64_t d : h.shape) overflow |= __builtin_mul_overflow(elements, static_cast<uint64_t>(d), &elements);
  const size_t item = npy_descr_itemsize(h.descr);
  uint64_t data_bytes = 0;
  overflow |= __builtin_mul_overflow(elements, static_cast<uint64_t>(item), &data_bytes);
  const std::string dtype = dtype_of(h.descr);

  out << "npy file: " << path.string() << " (" << with_commas(file_size) << " bytes)\n";
  out << "array: " << (dtype.empty() ? "dtype " + h.descr : dtype + " ('" + h.descr + "')") << ", shape "
      << shape_text(h.shape) << (h.fortran_order ? ", Fortran order" : ", C order") << ", "
      << (overflow ? std::string("more elements than 64 bits count") : with_commas(elements) + " elements")
      << "; header " << h.data_offset << " bytes (format " << h.major_version << ".0)\n";
  if (const std::string note = shard_note(path, h.shape); !note.empty()) out << note << "\n";
  if (item == 0) {
    out << "size: not checked (inspect does not know the item size of '" << h.descr << "')\n";
    return;
  }
  const uint64_t have = file_size - std::min<uint64_t>(file_size, h.data_offset);
  if (!overflow && have == data_bytes) {
    out << "size: matches the header (" << with_commas(data_bytes) << " data bytes after the " << h.data_offset
        << "-byte header)\n";
    return;
  }
  // The description is printed; the mismatch is the error that makes the exit status non-zero.
  const std::string promised =
      overflow ? std::string("more bytes than 64 bits count") : with_commas(data_bytes) + " data bytes";
  if (!overflow && have < data_bytes)
    throw Error(Errc::format, fmt::format("{}: truncated: the header promises {} ({} {} of {} bytes) but only {} "
                                          "follow the header — an interrupted write or copy",
                                          path.string(), promised, with_commas(elements),
                                          dtype.empty() ? h.descr : dtype, item, with_commas(have)));
  if (overflow)
    throw Error(Errc::format, fmt::format("{}: the header's shape {} promises {}: not a file numpy can load",
                                          path.string(), shape_text(h.shape), promised));
  throw Error(Errc::format, fmt::format("{}: {} bytes more than the {} the header promises (numpy.load ignores "
                                        "them; no writer of .npy files leaves them)",
                                        path.string(), with_commas(have - data_bytes), promised));
}

}  // namespace stoke::inspect
