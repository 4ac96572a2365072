#include "io/torch_checkpoint.h"

#include <cctype>

#include "io/torch_pickle.h"
#include "io/torch_zip.h"

namespace stoke {

namespace {

struct TorchType {
  std::string_view storage;     // the typed storage's name after "torch." ("" for dtypes without one)
  std::string_view dtype_name;  // torch's name of the dtype, after "torch."
  std::optional<DType> dtype;   // nullopt: stoke has none
};

// Every element type torch.save writes: legacy typed storages (read through
// _rebuild_tensor_v2) and, for dtypes without one, the dtype's own name beside
// an UntypedStorage (_rebuild_tensor_v3).
constexpr TorchType kTorchTypes[] = {
    {"FloatStorage", "float32", DType::f32},
    {"HalfStorage", "float16", DType::f16},
    {"BFloat16Storage", "bfloat16", DType::bf16},
    {"DoubleStorage", "float64", DType::f64},
    {"LongStorage", "int64", DType::i64},
    {"IntStorage", "int32", DType::i32},
    {"ShortStorage", "int16", DType::i16},
    {"CharStorage", "int8", DType::i8},
    {"ByteStorage", "uint8", DType::u8},
    {"BoolStorage", "bool", DType::boolean},
    {"", "uint16", DType::u16},
    {"", "uint32", DType::u32},
    {"", "uint64", DType::u64},
    {"ComplexFloatStorage", "complex64", std::nullopt},
    {"ComplexDoubleStorage", "complex128", std::nullopt},
    {"ComplexHalfStorage", "complex32", std::nullopt},
    {"QInt8Storage", "qint8", std::nullopt},
    {"QUInt8Storage", "quint8", std::nullopt},
    {"QInt32Storage", "qint32", std::nullopt},
    {"QUInt4x2Storage", "quint4x2", std::nullopt},
    {"QUInt2x4Storage", "quint2x4", std::nullopt},
};

constexpr const char* kReadDtypes =
    "float32, float16, bfloat16, float64, int64, int32, int16, int8, uint8, bool, uint16, uint32, uint64";

std::string_view after_torch(std::string_view full) {
  constexpr std::string_view prefix = "torch.";
  return full.substr(0, prefix.size()) == prefix ? full.substr(prefix.size()) : std::string_view{};
}

std::string dims_text(const std::vector<int64_t>& dims) {
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

// A storage key names the record data/<key>: torch writes "0", "1", ... (or
// other plain names); a key with a slash would reach outside data/.
bool is_record_key(std::string_view key) {
  if (key.empty() || key == "." || key == "..") return false;
  for (char c : key)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == '.')) return false;
  return true;
}

// The keys under which training scripts nest a state dict: named in the refusal.
bool is_wrapper_key(std::string_view key) {
  for (std::string_view k : {"state_dict", "model", "model_state_dict", "module", "net", "params", "weights"})
    if (key == k) return true;
  return false;
}

}  // namespace

std::optional<DType> dtype_of_torch_storage(std::string_view storage_type) {
  const std::string_view name = after_torch(storage_type);
  for (const TorchType& t : kTorchTypes)
    if (!t.storage.empty() && t.storage == name) return t.dtype;
  return std::nullopt;
}

std::optional<DType> dtype_of_torch_dtype(std::string_view dtype) {
  const std::string_view name = after_torch(dtype);
  for (const TorchType& t : kTorchTypes)
    if (t.dtype_name == name) return t.dtype;
  return std::nullopt;
}

std::shared_ptr<TorchCheckpoint> TorchCheckpoint::open(const std::filesystem::path& path) {
  std::shared_ptr<TorchCheckpoint> c(new TorchCheckpoint());
  c->path_ = path;
  try {
    c->mapping_ = std::make_unique<MappedFile>(path);
  } catch (const Error& e) {
    throw TorchCheckpointError(TorchCheckpointErrc::io, e.what());
  }
  c->bytes_ = c->mapping_->bytes();
  c->parse(path.string());
  return c;
}

std::shared_ptr<TorchCheckpoint> TorchCheckpoint::from_bytes(std::span<const std::byte> bytes, std::string label) {
  std::shared_ptr<TorchCheckpoint> c(new TorchCheckpoint());
  c->path_ = label;
  c->owned_.assign(bytes.begin(), bytes.end());
  c->bytes_ = c->owned_;
  c->parse(label);
  return c;
}

const StoredTensor* TorchCheckpoint::find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

void TorchCheckpoint::parse(const std::string& label) {
  auto fail = [&](TorchCheckpointErrc kind, const std::string& what) {
    return TorchCheckpointError(kind, label + ": " + what);
  };

  // A bare pickle (protocol 2: 0x80 0x02) is the format before PyTorch 1.6.
  if (bytes_.size() >= 2 && static_cast<uint8_t>(bytes_[0]) == 0x80 && static_cast<uint8_t>(bytes_[1]) >= 2 &&
      static_cast<uint8_t>(bytes_[1]) <= 5)
    throw fail(TorchCheckpointErrc::legacy_format,
               "a PyTorch checkpoint in the legacy format (a bare pickle: torch.save before PyTorch 1.6, or "
               "_use_new_zipfile_serialization=False) is not read; re-save it with a current torch.save, or "
               "convert it to safetensors");
  const TorchZip zip(bytes_, label);

  // ---- the archive folder every record sits in
  if (zip.entries().empty()) throw fail(TorchCheckpointErrc::missing_record, "the zip archive is empty (no data.pkl)");
  const std::string& first = zip.entries().front().name;
  const size_t slash = first.find('/');
  if (slash == std::string::npos)
    throw fail(TorchCheckpointErrc::bad_layout, "zip entry " + torch_quote(first) +
                                                    " is not inside an archive folder (torch.save puts every "
                                                    "record under one, such as archive/)");
  archive_ = first.substr(0, slash);
  const std::string prefix = archive_ + "/";
  for (const ZipEntry& e : zip.entries())
    if (e.name.compare(0, prefix.size(), prefix) != 0)
      throw fail(TorchCheckpointErrc::bad_layout,
                 "zip entry " + torch_quote(e.name) + " is outside the archive folder " + torch_quote(prefix));

  const ZipEntry* pickle = zip.find(prefix + "data.pkl");
  if (!pickle) throw fail(TorchCheckpointErrc::missing_record, "no " + prefix + "data.pkl (the pickled state dict)");
  zip.check_crc(*pickle);
  if (const ZipEntry* order = zip.find(prefix + "byteorder")) {
    zip.check_crc(*order);
    const auto bytes = zip.data(*order);
    const std::string_view text(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    if (text == "big")
      throw fail(TorchCheckpointErrc::big_endian,
                 prefix + "byteorder is \"big\": the storages were written big-endian; stoke reads little-endian "
                          "checkpoints only (re-save it on a little-endian machine)");
    if (text != "little")
      throw fail(TorchCheckpointErrc::bad_layout,
                 prefix + "byteorder holds " + torch_quote(text) + " (expected \"little\" or \"big\")");
  }

  const UnpickledData data = unpickle_restricted(zip.data(*pickle), label + ": " + prefix + "data.pkl");

  // ---- the state dict: a flat dict of name -> tensor
  const PickleValue& root = data.values[data.root];
  if (root.kind != PickleKind::dict)
    throw fail(TorchCheckpointErrc::not_state_dict,
               std::string("the saved object is ") + pickle_kind_name(root.kind) +
                   " (expected a dict of tensor name -> tensor, as torch.save(model.state_dict()) writes)");
  tensors_.reserve(root.items.size() / 2);
  for (size_t i = 0; i + 1 < root.items.size(); i += 2) {
    const PickleValue& key = data.values[root.items[i]];
    const PickleValue& value = data.values[root.items[i + 1]];
    if (key.kind != PickleKind::string)
      throw fail(TorchCheckpointErrc::not_state_dict, std::string("a key of the state dict is ") +
                                                          pickle_kind_name(key.kind) + " (expected tensor names)");
    const std::string& name = key.text;
    const std::string who = "tensor " + torch_quote(name);
    if (value.kind != PickleKind::tensor) {
      std::string what = "entry " + torch_quote(name) + " is " + pickle_kind_name(value.kind);
      if (value.kind == PickleKind::dict && is_wrapper_key(name))
        what += ": a training checkpoint that holds a state dict, not a state dict (save model.state_dict() "
                "itself)";
      else
        what += " (expected a tensor: stoke reads a flat state dict of name -> tensor)";
      throw fail(TorchCheckpointErrc::not_state_dict, what);
    }
    if (name.empty()) throw fail(TorchCheckpointErrc::not_state_dict, "a tensor has the empty name \"\"");
    if (name.find('\0') != std::string::npos)
      throw fail(TorchCheckpointErrc::not_state_dict, who + ": the name contains a NUL byte");
    if (index_.count(name))
      throw fail(TorchCheckpointErrc::duplicate_name, who + " appears twice in the state dict");

    const PickleTensor& t = data.tensors[value.ref];
    const PickleStorage& s = data.storages[t.storage];
    // The element type: the typed storage's (_rebuild_tensor_v2), or the dtype
    // argument beside an untyped storage (_rebuild_tensor_v3); never a mix.
    const bool untyped = s.type == kUntypedStorage;
    if (untyped != !t.dtype.empty())
      throw fail(TorchCheckpointErrc::refused_call,
                 who + ": storage type " + s.type + (t.dtype.empty() ? " without a dtype" : " with dtype " + t.dtype) +
                     " (torch pairs an UntypedStorage with a dtype, a typed storage with none)");
    const std::string& type_name = untyped ? t.dtype : s.type;
    const std::optional<DType> dtype = untyped ? dtype_of_torch_dtype(t.dtype) : dtype_of_torch_storage(s.type);
    if (!dtype) {
      std::string what = who + ": " + (untyped ? "dtype " : "storage type ") + type_name;
      if (!untyped)
        for (const TorchType& known : kTorchTypes)
          if (!known.storage.empty() && known.storage == after_torch(s.type))
            what += " (" + std::string(known.dtype_name) + ")";
      throw fail(TorchCheckpointErrc::unknown_dtype, what + " has no stoke dtype (stoke reads " + kReadDtypes + ")");
    }
    const uint64_t elem = dtype_size(*dtype);

    // The storage's record.
    if (!is_record_key(s.key))
      throw fail(TorchCheckpointErrc::bad_layout,
                 who + ": storage key " + torch_quote(s.key) + " is not a record name torch writes");
    const std::string record_name = prefix + "data/" + s.key;
    const ZipEntry* record = zip.find(record_name);
    if (!record)
      throw fail(TorchCheckpointErrc::missing_record,
                 who + ": its storage " + torch_quote(s.key) + " has no record " + record_name);
    // A typed storage counts elements, an untyped one bytes.
    const uint64_t claimed_bytes = static_cast<uint64_t>(s.numel);
    if (!untyped && claimed_bytes > UINT64_MAX / elem)
      throw fail(TorchCheckpointErrc::storage_size_mismatch,
                 who + ": storage " + torch_quote(s.key) + " claims " + std::to_string(s.numel) + " elements");
    if (record->size != (untyped ? claimed_bytes : claimed_bytes * elem))
      throw fail(TorchCheckpointErrc::storage_size_mismatch,
                 who + ": storage record " + record_name + " holds " + std::to_string(record->size) +
                     " bytes but the pickle says " + std::to_string(s.numel) +
                     (untyped ? " bytes" : " " + std::to_string(elem) + "-byte elements"));
    if (record->size % elem != 0)
      throw fail(TorchCheckpointErrc::storage_size_mismatch,
                 who + ": storage record " + record_name + " holds " + std::to_string(record->size) +
                     " bytes, not a whole number of " + std::to_string(elem) + "-byte " + type_name + " elements");
    const uint64_t storage_numel = record->size / elem;

    // Shape, element count, strides.
    if (t.stride.size() != t.shape.size())
      throw fail(TorchCheckpointErrc::bad_shape, who + ": " + std::to_string(t.stride.size()) + " strides for shape " +
                                                     dims_text(t.shape));
    uint64_t numel = 1;
    bool empty = false;
    for (int64_t d : t.shape) {
      if (d < 0) throw fail(TorchCheckpointErrc::bad_shape, who + ": shape " + dims_text(t.shape) + " has a negative dimension");
      if (d == 0) {
        empty = true;  // still multiply the rest: [0, 2^40, 2^40] is refused as a shape
        continue;
      }
      if (__builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel) || numel > UINT64_MAX / elem)
        throw fail(TorchCheckpointErrc::bad_shape,
                   who + ": shape " + dims_text(t.shape) + " has more elements than 64 bits can count in bytes");
    }
    if (empty) numel = 0;
    if (numel > 0) {
      // Row-major contiguous, as torch's is_contiguous: a dimension of size 1 may have any stride.
      std::vector<int64_t> expected(t.shape.size());
      int64_t step = 1;
      bool contiguous = true;
      for (size_t k = t.shape.size(); k-- > 0;) {
        expected[k] = step;
        if (t.shape[k] != 1 && t.stride[k] != step) contiguous = false;
        step *= t.shape[k];  // <= numel: no overflow
      }
      if (!contiguous)
        throw fail(TorchCheckpointErrc::not_contiguous,
                   who + ": strides " + dims_text(t.stride) + " for shape " + dims_text(t.shape) +
                       " are not row-major contiguous (expected " + dims_text(expected) +
                       "); save tensor.contiguous() instead");
    }
    if (t.storage_offset < 0)
      throw fail(TorchCheckpointErrc::bad_shape, who + ": storage_offset " + std::to_string(t.storage_offset) + " is negative");
    const auto offset = static_cast<uint64_t>(t.storage_offset);
    if (offset > storage_numel || numel > storage_numel - offset)
      throw fail(TorchCheckpointErrc::storage_out_of_range,
                 who + ": storage_offset " + std::to_string(offset) + " + " + std::to_string(numel) +
                     " elements run past its storage " + torch_quote(s.key) + " of " + std::to_string(storage_numel));

    StoredTensor v;
    v.name = name;
    v.dtype = *dtype;
    v.shape = t.shape;
    v.data = zip.data(*record).subspan(offset * elem, numel * elem);
    index_.emplace(name, tensors_.size());
    tensors_.push_back(std::move(v));
  }
}

}  // namespace stoke
