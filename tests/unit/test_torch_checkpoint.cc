// The restricted PyTorch checkpoint reader (io/torch_checkpoint.h, torch_zip.h,
// torch_pickle.h): real files written by torch.save (tests/data/torch/, made by
// tests/golden/make_torch_checkpoints.py, which records every element in
// expected.json) read back element for element; tiny-bert's pytorch_model.bin
// loads as a model folder and gives bitwise the tensors of its model.safetensors;
// hostile files built here byte by byte (zip and pickle) are each refused with
// one line of the expected kind, and nothing crashes.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <set>

#include <nlohmann/json.hpp>

#include "core/half.h"
#include "io/encoder_layout.h"
#include "io/hf_config.h"
#include "io/model_folder.h"
#include "io/model_weights.h"
#include "io/safetensors.h"
#include "io/torch_checkpoint.h"
#include "io/torch_pickle.h"
#include "io/torch_zip.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using namespace std::string_literals;  // "..."s: pickle bytes hold NULs

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "in: " << (haystack)

fs::path data_dir() { return test::source_dir() / "tests/data/torch"; }

std::string read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
  ASSERT_TRUE(out.good()) << path;
}

std::span<const std::byte> as_bytes(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::shared_ptr<TorchCheckpoint> load(const std::string& bytes) {
  return TorchCheckpoint::from_bytes(as_bytes(bytes), "test.pt");
}

// Runs f, expects a TorchCheckpointError of `kind` in one line; returns its message.
std::string expect_refused(TorchCheckpointErrc kind, const std::function<void()>& f) {
  try {
    f();
  } catch (const TorchCheckpointError& e) {
    EXPECT_STREQ(torch_checkpoint_errc_name(e.kind()), torch_checkpoint_errc_name(kind)) << e.what();
    EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected TorchCheckpointError " << torch_checkpoint_errc_name(kind) << ", got: " << e.what();
    return "";
  }
  ADD_FAILURE() << "expected TorchCheckpointError " << torch_checkpoint_errc_name(kind) << ", nothing thrown";
  return "";
}

std::string refused(TorchCheckpointErrc kind, const std::string& bytes) {
  return expect_refused(kind, [&] { load(bytes); });
}

// ---- a zip writer (STORED only, as torch writes) ------------------------------

std::string le(uint64_t v, int n) {
  std::string s;
  for (int i = 0; i < n; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
  return s;
}

struct Member {
  std::string name, data;
  uint16_t method = 0;             // 0 STORED, 8 deflate, ...
  uint64_t claimed_size = ~0ull;   // the uncompressed size written; ~0: data.size()
  bool bad_crc = false;
};

struct ZipShape {
  bool zip64_records = true;  // torch writes the zip64 end record and locator into every file
  bool sentinels = false;     // 0xFFFF... in the 32-bit fields, the values in zip64 extras
};

std::string zip(const std::vector<Member>& members, ZipShape shape = {}) {
  std::string out, central;
  for (const Member& m : members) {
    const uint64_t offset = out.size();
    const uint64_t size = m.claimed_size == ~0ull ? m.data.size() : m.claimed_size;
    uint32_t crc = crc32_of(as_bytes(m.data));
    if (m.bad_crc) crc ^= 1;
    out += le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(m.method, 2) + le(0, 4) + le(crc, 4) +
           le(m.data.size(), 4) + le(size, 4) + le(m.name.size(), 2) + le(0, 2) + m.name + m.data;
    std::string extra;
    uint64_t c32 = m.data.size(), u32 = size, o32 = offset;
    if (shape.sentinels) {
      extra = le(1, 2) + le(24, 2) + le(size, 8) + le(m.data.size(), 8) + le(offset, 8);
      c32 = u32 = o32 = 0xFFFFFFFF;
    }
    central += le(0x02014b50, 4) + le(0x031e, 2) + le(20, 2) + le(0, 2) + le(m.method, 2) + le(0, 4) + le(crc, 4) +
               le(c32, 4) + le(u32, 4) + le(m.name.size(), 2) + le(extra.size(), 2) + le(0, 2) + le(0, 2) +
               le(0, 2) + le(0, 4) + le(o32, 4) + m.name + extra;
  }
  const uint64_t cd_offset = out.size();
  out += central;
  const uint64_t n = members.size();
  if (shape.zip64_records) {
    const uint64_t e64 = out.size();
    out += le(0x06064b50, 4) + le(44, 8) + le(0x031e, 2) + le(45, 2) + le(0, 4) + le(0, 4) + le(n, 8) + le(n, 8) +
           le(central.size(), 8) + le(cd_offset, 8);
    out += le(0x07064b50, 4) + le(0, 4) + le(e64, 8) + le(1, 4);
  }
  const uint64_t n16 = shape.sentinels ? 0xFFFF : n;
  out += le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(n16, 2) + le(n16, 2) +
         le(shape.sentinels ? 0xFFFFFFFF : central.size(), 4) + le(shape.sentinels ? 0xFFFFFFFF : cd_offset, 4) +
         le(0, 2);
  return out;
}

// ---- a pickle writer (the opcodes torch.save's protocol 2 uses) ----------------

std::string glob(const std::string& module, const std::string& name) { return "c" + module + "\n" + name + "\n"; }
std::string ustr(const std::string& s) {
  std::string out = "X";  // appended piecewise: GCC 12 warns (-Wrestrict) on "X" + std::string
  out += le(s.size(), 4);
  return out + s;
}
std::string num(int64_t v) { return "\x8a\x08" + le(static_cast<uint64_t>(v), 8); }  // LONG1, 8 bytes
std::string ints(const std::vector<int64_t>& v) {
  std::string s = "(";
  for (int64_t x : v) s += num(x);
  return s + "t";
}
const std::string kEmptyOrderedDict = glob("collections", "OrderedDict") + ")R";

// BINPERSID of ('storage', <module>.<type>, key, 'cpu', numel).
std::string storage_pid(const std::string& module, const std::string& type, const std::string& key, int64_t numel) {
  std::string out = "(";
  out += ustr("storage") + glob(module, type) + ustr(key) + ustr("cpu") + num(numel);
  return out + "tQ";
}

struct TensorSpec {
  std::string module = "torch", type = "FloatStorage", key = "0";
  int64_t numel = 4, offset = 0;  // numel counts bytes for an UntypedStorage
  std::vector<int64_t> shape{2, 2}, stride{2, 1};
  std::string hooks = kEmptyOrderedDict;
  std::string dtype;  // set: _rebuild_tensor_v3 with torch.<dtype> (as torch writes uint16 and the like)
};

std::string rebuild(const TensorSpec& t) {
  std::string out = glob("torch._utils", t.dtype.empty() ? "_rebuild_tensor_v2" : "_rebuild_tensor_v3");
  out += '(';
  out += storage_pid(t.module, t.type, t.key, t.numel) + num(t.offset) + ints(t.shape) + ints(t.stride) + "\x89" +
         t.hooks;
  if (!t.dtype.empty()) out += glob("torch", t.dtype);
  return out + "tR";
}

TensorSpec untyped(const std::string& dtype, int64_t bytes) {
  TensorSpec t;
  t.module = "torch.storage";
  t.type = "UntypedStorage";
  t.numel = bytes;
  t.dtype = dtype;
  return t;
}

// {name: value, ...} as torch.save writes a dict, values given as pickle text.
std::string state_dict(const std::vector<std::pair<std::string, std::string>>& entries) {
  std::string s = "\x80\x02}(";
  for (const auto& [k, v] : entries) s += ustr(k) + v;
  return s + "u.";
}

std::string floats(const std::vector<float>& v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// archive/{data.pkl, byteorder, data/<key>..., version}.
std::string checkpoint(const std::string& pickle, std::vector<Member> records = {{"0", floats({1, 2, 3, 4})}},
                       const std::string& byteorder = "little", ZipShape shape = {}) {
  std::vector<Member> members{{"archive/data.pkl", pickle}, {"archive/byteorder", byteorder}};
  for (Member& r : records) {
    r.name = "archive/data/" + r.name;
    members.push_back(std::move(r));
  }
  members.push_back({"archive/version", "3\n"});
  return zip(members, shape);
}

std::string one_tensor(const TensorSpec& t = {}) { return state_dict({{"w", rebuild(t)}}); }

// ---- element values -------------------------------------------------------------

double float_at(const StoredTensor& t, int64_t i) {
  const std::byte* p = t.data.data() + i * static_cast<int64_t>(dtype_size(t.dtype));
  switch (t.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return f;
    }
    case DType::f64: {
      double d;
      std::memcpy(&d, p, 8);
      return d;
    }
    case DType::f16: {
      f16 h;
      std::memcpy(&h.bits, p, 2);
      return to_float(h);
    }
    case DType::bf16: {
      bf16 h;
      std::memcpy(&h.bits, p, 2);
      return to_float(h);
    }
    default: ADD_FAILURE() << "not a float dtype"; return 0;
  }
}

int64_t int_at(const StoredTensor& t, int64_t i) {
  const std::byte* p = t.data.data() + i * static_cast<int64_t>(dtype_size(t.dtype));
  auto get = [&](auto v) {
    std::memcpy(&v, p, sizeof v);
    return static_cast<int64_t>(v);
  };
  switch (t.dtype) {
    case DType::i64: return get(int64_t{});
    case DType::i32: return get(int32_t{});
    case DType::i16: return get(int16_t{});
    case DType::i8: return get(int8_t{});
    case DType::u8: return get(uint8_t{});
    case DType::u16: return get(uint16_t{});
    case DType::boolean: return get(uint8_t{});
    default: ADD_FAILURE() << "not an integer dtype"; return 0;
  }
}

// ---- real torch.save files ------------------------------------------------------

TEST(TorchCheckpoint, RealFilesMatchEveryElement) {
  const json expected = json::parse(read_bytes(data_dir() / "expected.json"));
  ASSERT_EQ(expected.size(), 4u);
  for (const auto& [file, tensors] : expected.items()) {
    SCOPED_TRACE(file);
    const auto c = TorchCheckpoint::open(data_dir() / file);
    ASSERT_EQ(c->tensors().size(), tensors.size());
    for (size_t k = 0; k < tensors.size(); ++k) {
      const json& want = tensors[k];
      const StoredTensor& t = c->tensors()[k];  // the state dict's order
      SCOPED_TRACE(t.name);
      EXPECT_EQ(t.name, want["name"].get<std::string>());
      EXPECT_EQ(c->find(t.name), &t);
      EXPECT_EQ(std::string(dtype_name(t.dtype)), want["dtype"].get<std::string>());
      EXPECT_EQ(t.shape, want["shape"].get<std::vector<int64_t>>());
      const json& values = want["values"];
      ASSERT_EQ(t.numel(), static_cast<int64_t>(values.size()));
      ASSERT_EQ(t.data.size(), values.size() * dtype_size(t.dtype));
      for (size_t i = 0; i < values.size(); ++i) {
        if (dtype_is_float(t.dtype)) {
          EXPECT_EQ(float_at(t, static_cast<int64_t>(i)), values[i].get<double>()) << "element " << i;
        } else if (t.dtype == DType::boolean) {
          EXPECT_EQ(int_at(t, static_cast<int64_t>(i)), values[i].get<bool>() ? 1 : 0) << "element " << i;
        } else {
          EXPECT_EQ(int_at(t, static_cast<int64_t>(i)), values[i].get<int64_t>()) << "element " << i;
        }
      }
    }
  }
}

TEST(TorchCheckpoint, ViewsShareTheirStorageZeroCopy) {
  const auto c = TorchCheckpoint::open(data_dir() / "views.pt");
  EXPECT_EQ(c->archive_name(), "views");
  const StoredTensor* whole = c->find("shared.whole");
  const StoredTensor* tail = c->find("shared.tail");
  const StoredTensor* row = c->find("shared.row");
  ASSERT_TRUE(whole && tail && row);
  // One storage: the views point into the same bytes of the mapping, 4 floats in.
  EXPECT_EQ(tail->data.data(), whole->data.data() + 16);
  EXPECT_EQ(row->data.data(), whole->data.data() + 16);
  EXPECT_EQ(row->shape, (std::vector<int64_t>{1, 4}));
  EXPECT_EQ(tail->data.size(), 8u * 4);
}

TEST(TorchCheckpoint, TheZipOfARealFileChecksOut) {
  // Every record's CRC as torch wrote it: the CRC the reader checks data.pkl with is zip's.
  for (const char* file : {"dtypes.pt", "views.pt", "state_dict.pt", "protocol4.pt"}) {
    const std::string bytes = read_bytes(data_dir() / file);
    const TorchZip z(as_bytes(bytes), file);
    EXPECT_GE(z.entries().size(), 6u) << file;
    for (const ZipEntry& e : z.entries()) {
      EXPECT_NO_THROW(z.check_crc(e)) << e.name;
      if (e.name.find("/data/") != std::string::npos) {
        EXPECT_EQ(e.data_offset % 64, 0u) << e.name;  // torch aligns storage records to 64 bytes
      }
    }
  }
}

TEST(TorchCheckpoint, RealFilesItRefuses) {
  const fs::path r = data_dir() / "refused";
  auto open = [&](const char* name) { return [=] { TorchCheckpoint::open(r / name); }; };
  std::string m = expect_refused(TorchCheckpointErrc::not_contiguous, open("transposed.pt"));
  EXPECT_CONTAINS(m, "tensor \"t\": strides [1, 3] for shape [3, 2] are not row-major contiguous (expected [2, 1])");
  m = expect_refused(TorchCheckpointErrc::not_state_dict, open("training_checkpoint.pt"));
  EXPECT_CONTAINS(m, "entry \"state_dict\" is a dict: a training checkpoint");
  m = expect_refused(TorchCheckpointErrc::unknown_dtype, open("complex.pt"));
  EXPECT_CONTAINS(m, "storage type torch.ComplexFloatStorage (complex64) has no stoke dtype");
  m = expect_refused(TorchCheckpointErrc::refused_global, open("module.pt"));
  EXPECT_CONTAINS(m, "refused global torch.nn.modules.linear.Linear: only tensors and plain containers are read");
  EXPECT_CONTAINS(m, "module.pt");
  m = expect_refused(TorchCheckpointErrc::legacy_format, open("legacy.pt"));
  EXPECT_CONTAINS(m, "legacy format");
  m = expect_refused(TorchCheckpointErrc::io, [&] { TorchCheckpoint::open(r / "absent.pt"); });
  EXPECT_CONTAINS(m, "absent.pt");
}

// ---- model folders ----------------------------------------------------------------

// tiny-bert with its weights as pytorch_model.bin only (the other files copied from the fixture).
fs::path tiny_bert_bin_folder(const std::string& scratch) {
  const fs::path dir = test::scratch_dir(scratch) / "tiny-bert";
  fs::create_directories(dir);
  for (const auto& e : fs::recursive_directory_iterator(test::fixture("models/tiny-bert"))) {
    const fs::path target = dir / fs::relative(e.path(), test::fixture("models/tiny-bert"));
    if (e.is_directory()) {
      fs::create_directories(target);
    } else if (e.path().filename() != "model.safetensors") {
      fs::copy_file(e.path(), target);
      fs::permissions(target, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
    }
  }
  fs::copy_file(data_dir() / "tiny-bert/pytorch_model.bin", dir / "pytorch_model.bin");
  return dir;
}

TEST(TorchCheckpointFolder, TinyBertBinGivesTheSafetensorsTensorsBitwise) {
  const fs::path dir = tiny_bert_bin_folder("torch_tiny_bert");
  const ModelFolder mf = open_model_folder(dir);
  const ModelWeights w = open_model_folder_weights(mf);
  ASSERT_EQ(w.files().size(), 1u);
  EXPECT_EQ(w.files()[0]->format(), "torch");
  EXPECT_EQ(w.files()[0]->path().filename(), "pytorch_model.bin");
  EXPECT_FALSE(w.sharded());

  const auto ref = SafetensorsFile::open(test::fixture("models/tiny-bert/model.safetensors"));
  ASSERT_EQ(w.size(), ref->tensors().size());
  for (const StoredTensor& t : ref->tensors()) {
    const StoredTensor* v = w.find(t.name);
    ASSERT_NE(v, nullptr) << t.name;
    EXPECT_EQ(v->dtype, t.dtype) << t.name;
    EXPECT_EQ(v->shape, t.shape) << t.name;
    ASSERT_EQ(v->data.size(), t.data.size()) << t.name;
    EXPECT_EQ(std::memcmp(v->data.data(), t.data.data(), t.data.size()), 0) << t.name;
    EXPECT_EQ(w.file_of(t.name), "pytorch_model.bin");
  }
  // The encoder finds every tensor it needs, shapes checked against config.json.
  for (const auto& r : resolve_encoder_tensors(mf.config, w, true, true)) EXPECT_NE(r.view, nullptr) << r.expected.name;
}

TEST(TorchCheckpointFolder, SafetensorsWinsWhenBothExist) {
  const fs::path dir = tiny_bert_bin_folder("torch_both");
  fs::copy_file(test::fixture("models/tiny-bert/model.safetensors"), dir / "model.safetensors");
  write_bytes(dir / "pytorch_model.bin", "junk: never opened while model.safetensors is there");
  const ModelWeights w = open_model_weights(dir);
  ASSERT_EQ(w.files().size(), 1u);
  EXPECT_EQ(w.files()[0]->format(), "safetensors");
}

TEST(TorchCheckpointFolder, ShardedBinIndex) {
  const fs::path dir = test::scratch_dir("torch_sharded") / "m";
  fs::create_directories(dir);
  fs::copy_file(data_dir() / "dtypes.pt", dir / "pytorch_model-00001-of-00002.bin");
  fs::copy_file(data_dir() / "views.pt", dir / "pytorch_model-00002-of-00002.bin");
  json map;
  for (const char* n : {"f32", "bf16", "bool", "empty"}) map[n] = "pytorch_model-00001-of-00002.bin";
  for (const char* n : {"shared.whole", "shared.tail", "param"}) map[n] = "pytorch_model-00002-of-00002.bin";
  write_bytes(dir / "pytorch_model.bin.index.json", json{{"weight_map", map}}.dump());
  const ModelWeights w = open_model_weights(dir);
  EXPECT_TRUE(w.sharded());
  ASSERT_EQ(w.files().size(), 2u);
  EXPECT_EQ(w.file_of("bf16"), "pytorch_model-00001-of-00002.bin");
  EXPECT_EQ(w.file_of("shared.tail"), "pytorch_model-00002-of-00002.bin");
  ASSERT_NE(w.find("column"), nullptr);  // a shard's tensors the map does not name still load (as for safetensors)

  // A tensor the map puts in the wrong shard, and a shard of the other format.
  map["param"] = "pytorch_model-00001-of-00002.bin";
  write_bytes(dir / "pytorch_model.bin.index.json", json{{"weight_map", map}}.dump());
  try {
    open_model_weights(dir);
    ADD_FAILURE() << "nothing thrown";
  } catch (const ModelFolderError& e) {
    EXPECT_EQ(e.kind(), ModelFolderErrc::tensor_not_in_shard) << e.what();
  }
  map["param"] = "model-00001-of-00002.safetensors";
  write_bytes(dir / "pytorch_model.bin.index.json", json{{"weight_map", map}}.dump());
  try {
    open_model_weights(dir);
    ADD_FAILURE() << "nothing thrown";
  } catch (const ModelFolderError& e) {
    EXPECT_EQ(e.kind(), ModelFolderErrc::bad_index) << e.what();
    EXPECT_CONTAINS(e.what(), "expected a .bin file");
  }
}

TEST(TorchCheckpointFolder, AHostileBinIsRefusedNamingTheFile) {
  const fs::path dir = tiny_bert_bin_folder("torch_hostile_folder");
  write_bytes(dir / "pytorch_model.bin",
              checkpoint("\x80\x02" + glob("posix", "system") + "(" + ustr("touch /tmp/pwned") + "tR."));
  const std::string m = expect_refused(TorchCheckpointErrc::refused_global, [&] { open_model_weights(dir); });
  EXPECT_CONTAINS(m, (dir / "pytorch_model.bin").string());
  EXPECT_CONTAINS(m, "refused global posix.system: only tensors and plain containers are read");
  EXPECT_FALSE(fs::exists("/tmp/pwned"));
}

// ---- hostile pickles ------------------------------------------------------------------

TEST(TorchPickle, TheBuiltCheckpointIsValid) {
  // The builders below make what the reader accepts; each hostile case changes one thing.
  const auto c = load(checkpoint(one_tensor()));
  ASSERT_EQ(c->tensors().size(), 1u);
  EXPECT_EQ(c->tensors()[0].shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(float_at(c->tensors()[0], 3), 4.0);
  // The same archive with zip64 sentinels in every 32-bit field (a > 4 GiB file's layout).
  const auto c64 = load(checkpoint(one_tensor(), {{"0", floats({1, 2, 3, 4})}}, "little", {true, true}));
  EXPECT_EQ(float_at(c64->tensors()[0], 2), 3.0);
  // Without byteorder (files before PyTorch 1.10) and without zip64 records.
  std::vector<Member> m{{"a/data.pkl", one_tensor()}, {"a/data/0", floats({1, 2, 3, 4})}};
  EXPECT_EQ(load(zip(m, {false, false}))->archive_name(), "a");
}

TEST(TorchPickle, GlobalsOffTheListAreRefusedByName) {
  std::string m = refused(TorchCheckpointErrc::refused_global,
                          checkpoint("\x80\x02" + glob("posix", "system") + "(" + ustr("id") + "tR."));
  EXPECT_CONTAINS(m, "test.pt: archive/data.pkl at byte 2 (GLOBAL): refused global posix.system: only tensors and "
                     "plain containers are read");
  // os.system through STACK_GLOBAL (protocol 4).
  const std::string p4 = "\x80\x04\x8c\x02os\x94\x8c\x06system\x94\x93(" + ustr("id") + "tR.";
  m = refused(TorchCheckpointErrc::refused_global, checkpoint(p4));
  EXPECT_CONTAINS(m, "(STACK_GLOBAL): refused global os.system: only tensors and plain containers are read");
  // On torch's own allow list but not on stoke's: still refused by name.
  const std::vector<std::pair<std::string, std::string>> near_misses = {
      {"torch._utils", "_rebuild_parameter_with_state"}, {"builtins", "eval"}, {"torch", "Size"},
      {"collections", "Counter"}, {"torch", "load"}};
  for (const auto& [module, name] : near_misses) {
    m = refused(TorchCheckpointErrc::refused_global, checkpoint("\x80\x02" + glob(module, name) + "."));
    EXPECT_CONTAINS(m, "refused global " + module + "." + name);
  }
  // A name with odd bytes is quoted, not printed raw.
  m = refused(TorchCheckpointErrc::refused_global, checkpoint("\x80\x02" + glob("a\x1b[2J", "b") + "."));
  EXPECT_CONTAINS(m, "refused global \"a\\x1b[2J.b\"");
}

TEST(TorchPickle, CallsAndObjectsThatAreNotTensorsAreRefused) {
  // REDUCE of a storage type (allowed only inside a persistent id) and of a plain value.
  std::string m = refused(TorchCheckpointErrc::refused_call, checkpoint("\x80\x02" + glob("torch", "FloatStorage") + ")R."));
  EXPECT_CONTAINS(m, "REDUCE of torch.FloatStorage");
  m = refused(TorchCheckpointErrc::refused_call, checkpoint("\x80\x02" + ustr("os") + ")R."));
  EXPECT_CONTAINS(m, "REDUCE of a string");
  // OrderedDict with items, BUILD on a tensor, backward hooks, a non-storage persistent id.
  refused(TorchCheckpointErrc::refused_call,
          checkpoint("\x80\x02" + glob("collections", "OrderedDict") + "(" + ustr("x") + "\x85tR."));
  m = refused(TorchCheckpointErrc::refused_call, checkpoint("\x80\x02" + rebuild({}) + "}b."));
  EXPECT_CONTAINS(m, "BUILD of a tensor");
  TensorSpec hooked;
  hooked.hooks = "}" + ustr("h") + "Ns";
  m = refused(TorchCheckpointErrc::refused_call, checkpoint(one_tensor(hooked)));
  EXPECT_CONTAINS(m, "backward hooks");
  m = refused(TorchCheckpointErrc::refused_call, checkpoint("\x80\x02(" + ustr("module") + ustr("x") + "tQ."));
  EXPECT_CONTAINS(m, "persistent id");
  // Opcodes that build objects or name globals by number.
  m = refused(TorchCheckpointErrc::pickle_refused_opcode,
              checkpoint("\x80\x02" + glob("collections", "OrderedDict") + ")\x81."));
  EXPECT_CONTAINS(m, "opcode NEWOBJ is refused: it creates an instance of a class");
  m = refused(TorchCheckpointErrc::pickle_refused_opcode, checkpoint("\x80\x02(iposix\nsystem\n."));
  EXPECT_CONTAINS(m, "opcode INST is refused");
  m = refused(TorchCheckpointErrc::pickle_refused_opcode, checkpoint("\x80\x02\x82\x01."));
  EXPECT_CONTAINS(m, "opcode EXT1 is refused");
  refused(TorchCheckpointErrc::pickle_refused_opcode, checkpoint("\x80\x02(o."));
  refused(TorchCheckpointErrc::pickle_refused_opcode, checkpoint("\x80\x02\x8f."));  // EMPTY_SET
  m = refused(TorchCheckpointErrc::pickle_refused_opcode, checkpoint("\x80\x02\xff."));
  EXPECT_CONTAINS(m, "unknown opcode 0xff");
}

TEST(TorchPickle, NestingMemoAndSizeLimits) {
  // Lists nested 100,000 deep, three ways: MARKs, APPENDs, TUPLE1s.
  std::string m = refused(TorchCheckpointErrc::pickle_limit, checkpoint("\x80\x02" + std::string(100000, '(') + "."));
  EXPECT_CONTAINS(m, "nested more than 100 deep");
  refused(TorchCheckpointErrc::pickle_limit,
          checkpoint("\x80\x02" + std::string(100000, ']') + std::string(99999, 'a') + "."));
  refused(TorchCheckpointErrc::pickle_limit, checkpoint("\x80\x02N" + std::string(100000, '\x85') + "."));
  // A list appended to itself grows deeper each time, and is refused, not walked.
  std::string self = "\x80\x02]q\x00"s;
  for (int i = 0; i < 200; ++i) self += "h\x00" "a"s;
  refused(TorchCheckpointErrc::pickle_limit, checkpoint(self + "."));
  // A huge memo index, and one never stored.
  m = refused(TorchCheckpointErrc::pickle_limit, checkpoint("\x80\x02N" "r\xff\xff\xff\xff."));
  EXPECT_CONTAINS(m, "memo index 4294967295");
  m = refused(TorchCheckpointErrc::pickle_malformed, checkpoint("\x80\x02j\xf0\xff\xff\xff."));
  EXPECT_CONTAINS(m, "memo index 4294967280 was never stored");
  // Lengths past the end of the record: nothing is allocated for them.
  m = refused(TorchCheckpointErrc::pickle_malformed, checkpoint("\x80\x02X\xff\xff\xff\x7f" "abc"));
  EXPECT_CONTAINS(m, "truncated");
  refused(TorchCheckpointErrc::pickle_malformed, checkpoint("\x80\x02\x8d" + le(~0ull, 8) + "."));  // BINUNICODE8
  refused(TorchCheckpointErrc::pickle_malformed, checkpoint("\x80\x04\x95" + le(1ull << 40, 8) + "N."));  // FRAME
  // Integers wider than 64 bits.
  refused(TorchCheckpointErrc::pickle_limit, checkpoint("\x80\x02\x8a\x09" + std::string(9, '\x01') + "."));
  // A GLOBAL whose name never ends.
  refused(TorchCheckpointErrc::pickle_limit, checkpoint("\x80\x02" "c" + std::string(10000, 'a')));
}

TEST(TorchPickle, MalformedPickles) {
  auto bad = [](const std::string& pickle, const char* says) {
    EXPECT_CONTAINS(refused(TorchCheckpointErrc::pickle_malformed, checkpoint(pickle)), says);
  };
  bad("N.", "does not start with PROTO");
  bad("\x80\x01N.", "pickle protocol 1");
  bad("\x80\x02N", "ends without STOP");
  bad("\x80\x02N.N", "1 bytes after STOP");
  bad("\x80\x02NN.", "STOP with 2 values");
  bad("\x80\x02(N.", "STOP inside an unclosed MARK");
  bad("\x80\x02t.", "no MARK");
  bad("\x80\x02(a.", "the stack is empty");  // APPEND cannot reach below a MARK
  bad("\x80\x02NNa.", "adds items to None");
  bad("\x80\x02}(Nu.", "an odd number");
  bad("\x80\x02X\x02\x00\x00\x00\xff\xfe."s, "not valid UTF-8");
  bad("\x80\x02\x80\x02N.", "PROTO after the first opcode");
  bad("\x80\x02" + glob("torch._utils", "_rebuild_tensor_v2") + "(" + ustr("x") + "tR.", "called with 1 arguments");
  bad("\x80\x02" + glob("torch._utils", "_rebuild_tensor_v2") + "NR.", "called with None for its arguments");
}

TEST(TorchPickle, AcceptsWhatTorchMayWriteBeyondProtocol2) {
  // Protocol 4 opcodes around one tensor: FRAME, MEMOIZE, SHORT_BINUNICODE, STACK_GLOBAL, BINUNICODE8,
  // BININT/BININT2 numbers, and a bytes value inside a list elsewhere in the pickle (popped).
  std::string p = "\x80\x04\x95" + le(0, 8) + "}\x94(\x8c\x01w\x94" + "\x8c\x0ctorch._utils\x8c\x12_rebuild_tensor_v2\x93" +
                  "((\x8d" + le(7, 8) + "storage" + "\x8c\x05torch\x8c\x0c" "FloatStorage\x93" + "\x8c\x01" "0" +
                  "\x8c\x03" "cpu" + "J\x04\x00\x00\x00"s + "tQ" + "M\x00\x00"s + "K\x02K\x02\x86" + "K\x02K\x01\x86" +
                  "\x89" + "\x8c\x0b" "collections\x8c\x0bOrderedDict\x93)R" + "tR" + "u" + "]C\x02hi" "a0" + ".";
  const auto c = load(checkpoint(p));
  ASSERT_EQ(c->tensors().size(), 1u);
  EXPECT_EQ(c->tensors()[0].name, "w");
  EXPECT_EQ(float_at(c->tensors()[0], 1), 2.0);
  // _rebuild_parameter around a tensor, and the state dict's `_metadata` BUILD.
  const std::string param = glob("torch._utils", "_rebuild_parameter") + "(" + rebuild({}) + "\x88" +
                            kEmptyOrderedDict + "tR";
  const std::string sd = "\x80\x02" + kEmptyOrderedDict + "(" + ustr("p") + param + "u}" + ustr("_metadata") + "}s" + "b.";
  EXPECT_EQ(load(checkpoint(sd))->tensors()[0].name, "p");
}

// ---- hostile state dicts ---------------------------------------------------------------

TEST(TorchCheckpoint, TensorChecks) {
  TensorSpec t;
  t.offset = 1;  // 1 + 4 elements in a storage of 4
  std::string m = refused(TorchCheckpointErrc::storage_out_of_range, checkpoint(one_tensor(t)));
  EXPECT_CONTAINS(m, "tensor \"w\": storage_offset 1 + 4 elements run past its storage \"0\" of 4");
  t = {};
  t.offset = 1ll << 62;
  refused(TorchCheckpointErrc::storage_out_of_range, checkpoint(one_tensor(t)));
  t = {};
  t.offset = -1;
  refused(TorchCheckpointErrc::bad_shape, checkpoint(one_tensor(t)));
  // A view at an offset that fits is fine: elements 2 and 3.
  t = {};
  t.offset = 2;
  t.shape = {2};
  t.stride = {1};
  const auto view = load(checkpoint(one_tensor(t)));
  EXPECT_EQ(float_at(view->tensors()[0], 0), 3.0);

  t = {};
  t.shape = {2, -2};
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::bad_shape, checkpoint(one_tensor(t))), "negative dimension");
  t = {};
  t.shape = {1ll << 40, 1ll << 40};
  t.stride = {1ll << 40, 1};
  refused(TorchCheckpointErrc::bad_shape, checkpoint(one_tensor(t)));
  t = {};
  t.shape = {0, 1ll << 40, 1ll << 40};  // empty, but its dims still may not overflow
  t.stride = {1, 1, 1};
  refused(TorchCheckpointErrc::bad_shape, checkpoint(one_tensor(t)));
  t = {};
  t.stride = {1};
  refused(TorchCheckpointErrc::bad_shape, checkpoint(one_tensor(t)));
  t = {};
  t.stride = {1, 2};  // a transpose
  refused(TorchCheckpointErrc::not_contiguous, checkpoint(one_tensor(t)));
  t = {};
  t.shape = {1, 4};
  t.stride = {99, 1};  // a size-1 dimension may have any stride (torch's is_contiguous agrees)
  EXPECT_EQ(load(checkpoint(one_tensor(t)))->tensors()[0].shape, (std::vector<int64_t>{1, 4}));

  // The storage's record: missing, not a whole number of elements, a different count.
  t = {};
  t.key = "7";
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::missing_record, checkpoint(one_tensor(t))), "archive/data/7");
  refused(TorchCheckpointErrc::storage_size_mismatch, checkpoint(one_tensor(), {{"0", std::string(15, '\0')}}));
  t = {};
  t.numel = 5;
  refused(TorchCheckpointErrc::storage_size_mismatch, checkpoint(one_tensor(t)));
  t = {};
  t.key = "../data.pkl";
  refused(TorchCheckpointErrc::bad_layout, checkpoint(one_tensor(t)));
  // One key seen with two types.
  TensorSpec h;
  h.type = "HalfStorage";
  h.numel = 8;
  h.shape = {8};
  h.stride = {1};
  refused(TorchCheckpointErrc::storage_conflict, checkpoint(state_dict({{"a", rebuild({})}, {"b", rebuild(h)}})));

  // Dtypes stoke has no DType for, named.
  t = {};
  t.type = "QInt8Storage";
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::unknown_dtype, checkpoint(one_tensor(t))), "torch.QInt8Storage (qint8)");
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::unknown_dtype, checkpoint(one_tensor(untyped("float8_e4m3fn", 16)))),
                  "dtype torch.float8_e4m3fn has no stoke dtype");

  // _rebuild_tensor_v3: an UntypedStorage counts bytes, the dtype global says what they are.
  const auto u16 = load(checkpoint(one_tensor(untyped("uint16", 16)), {{"0", std::string(16, '\x01')}}));
  ASSERT_EQ(u16->tensors().size(), 1u);
  EXPECT_EQ(u16->tensors()[0].dtype, DType::u16);
  EXPECT_EQ(int_at(u16->tensors()[0], 3), 0x0101);
  // 16 bytes of uint16 are 8 elements: a [2, 2] view at offset 4 ends exactly at the end.
  TensorSpec tail = untyped("uint16", 16);
  tail.offset = 4;
  EXPECT_NO_THROW(load(checkpoint(one_tensor(tail), {{"0", std::string(16, '\x01')}})));
  tail.offset = 5;
  refused(TorchCheckpointErrc::storage_out_of_range, checkpoint(one_tensor(tail), {{"0", std::string(16, '\x01')}}));
  refused(TorchCheckpointErrc::storage_size_mismatch,
          checkpoint(one_tensor(untyped("uint16", 15)), {{"0", std::string(15, '\x01')}}));
  refused(TorchCheckpointErrc::storage_size_mismatch, checkpoint(one_tensor(untyped("uint16", 20))));  // the record is 16
  TensorSpec mixed = untyped("uint16", 16);
  mixed.module = "torch";
  mixed.type = "FloatStorage";  // a typed storage with a dtype beside it
  refused(TorchCheckpointErrc::refused_call, checkpoint(one_tensor(mixed)));
  // A dtype where a storage type belongs, and a storage type where a dtype belongs.
  TensorSpec wrong;
  wrong.type = "uint16";
  refused(TorchCheckpointErrc::refused_call, checkpoint(one_tensor(wrong)));
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::pickle_malformed, checkpoint(one_tensor(untyped("FloatStorage", 16)))),
                  "argument 7 (dtype) is a global");
}

TEST(TorchCheckpoint, StateDictShape) {
  std::string m = refused(TorchCheckpointErrc::duplicate_name,
                          checkpoint(state_dict({{"w", rebuild({})}, {"w", rebuild({})}})));
  EXPECT_CONTAINS(m, "tensor \"w\" appears twice");
  // Two names, one storage: legal.
  EXPECT_EQ(load(checkpoint(state_dict({{"a", rebuild({})}, {"b", rebuild({})}})))->tensors().size(), 2u);
  m = refused(TorchCheckpointErrc::not_state_dict, checkpoint("\x80\x02]."));
  EXPECT_CONTAINS(m, "the saved object is a list");
  m = refused(TorchCheckpointErrc::not_state_dict, checkpoint(state_dict({{"epoch", "K\x03"}})));
  EXPECT_CONTAINS(m, "entry \"epoch\" is an integer");
  refused(TorchCheckpointErrc::not_state_dict, checkpoint(state_dict({{"", rebuild({})}})));
  refused(TorchCheckpointErrc::not_state_dict, checkpoint(state_dict({{std::string("a\0b", 3), rebuild({})}})));
  refused(TorchCheckpointErrc::not_state_dict, checkpoint("\x80\x02}(K\x01" + rebuild({}) + "u."));
  // An empty state dict is a state dict.
  EXPECT_TRUE(load(checkpoint("\x80\x02}."))->tensors().empty());
}

// ---- hostile archives -------------------------------------------------------------------

TEST(TorchZip, ContainerChecks) {
  std::string m = refused(TorchCheckpointErrc::big_endian, checkpoint(one_tensor(), {{"0", floats({1, 2, 3, 4})}}, "big"));
  EXPECT_CONTAINS(m, "archive/byteorder is \"big\"");
  refused(TorchCheckpointErrc::bad_layout, checkpoint(one_tensor(), {{"0", floats({1, 2, 3, 4})}}, "middle"));

  // A deflate entry claiming 4 GiB: refused by its method before anything is inflated.
  m = refused(TorchCheckpointErrc::zip_compressed,
              zip({{"archive/data.pkl", std::string(100, 'x'), 8, 0xFFFFFFF0ull}}));
  EXPECT_CONTAINS(m, "zip entry \"archive/data.pkl\": is compressed (method 8, deflate, 100 bytes claiming 4294967280)");
  EXPECT_CONTAINS(m, "torch.save never compresses");

  const std::string pkl = one_tensor(), data = floats({1, 2, 3, 4});
  m = refused(TorchCheckpointErrc::zip_duplicate_name,
              zip({{"archive/data.pkl", pkl}, {"archive/data/0", data}, {"archive/data/0", data}}));
  EXPECT_CONTAINS(m, "\"archive/data/0\": appears twice");
  for (const char* name : {"archive/../etc/passwd", "/archive/data.pkl", "archive\\data.pkl", "archive//x", "archive/",
                           "", "archive/./x"})
    refused(TorchCheckpointErrc::zip_bad_name, zip({{"archive/data.pkl", pkl}, {name, data}}));
  m = refused(TorchCheckpointErrc::bad_layout, zip({{"archive/data.pkl", pkl}, {"other/data/0", data}}));
  EXPECT_CONTAINS(m, "outside the archive folder \"archive/\"");
  refused(TorchCheckpointErrc::bad_layout, zip({{"data.pkl", pkl}}));
  refused(TorchCheckpointErrc::missing_record, zip({{"archive/data/0", data}}));
  refused(TorchCheckpointErrc::missing_record, zip({}));
  refused(TorchCheckpointErrc::crc_mismatch, zip({{"archive/data.pkl", pkl, 0, ~0ull, true}, {"archive/data/0", data}}));

  // Not a zip at all.
  refused(TorchCheckpointErrc::not_zip, "");
  refused(TorchCheckpointErrc::not_zip, std::string(100, 'z'));
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::legacy_format, "\x80\x02\x8a\x0a"), "re-save it");
}

TEST(TorchZip, OverlapsCountsAndRecords) {
  const std::string pkl = one_tensor(), data = floats({1, 2, 3, 4});
  // An entry whose local header sits inside another entry's data: both are valid alone.
  {
    const std::string inner_name = "archive/data/0";
    const std::string inner = le(0x04034b50, 4) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) +
                              le(crc32_of(as_bytes(data)), 4) + le(data.size(), 4) + le(data.size(), 4) +
                              le(inner_name.size(), 2) + le(0, 2) + inner_name + data;
    std::string z = zip({{"archive/data.pkl", pkl}, {"archive/blob", inner}});
    // Add a central entry for the inner member by rebuilding: the central directory of `z`
    // plus one entry pointing into archive/blob's data.
    const TorchZip parsed(as_bytes(z), "z");
    const ZipEntry* blob = parsed.find("archive/blob");
    ASSERT_NE(blob, nullptr);
    const uint64_t inner_offset = blob->data_offset;
    std::string central;
    const uint64_t cd_offset = blob->data_offset + blob->size;
    const std::string body = z.substr(0, cd_offset);
    auto entry = [&](const std::string& name, const std::string& bytes, uint64_t offset) {
      return le(0x02014b50, 4) + le(0x031e, 2) + le(20, 2) + le(0, 2) + le(0, 2) + le(0, 4) +
             le(crc32_of(as_bytes(bytes)), 4) + le(bytes.size(), 4) + le(bytes.size(), 4) + le(name.size(), 2) +
             le(0, 2) + le(0, 2) + le(0, 2) + le(0, 2) + le(0, 4) + le(offset, 4) + name;
    };
    central += entry("archive/data.pkl", pkl, parsed.find("archive/data.pkl")->header_offset);
    central += entry("archive/blob", inner, blob->header_offset);
    central += entry(inner_name, data, inner_offset);
    std::string again = body + central + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(3, 2) + le(3, 2) +
                        le(central.size(), 4) + le(cd_offset, 4) + le(0, 2);
    EXPECT_CONTAINS(refused(TorchCheckpointErrc::zip_overlap, again), "share bytes");
  }
  // An end record claiming two million entries in a tiny directory.
  std::string z = zip({{"archive/data.pkl", pkl}}, {false, false});
  std::string many = z.substr(0, z.size() - 22) + le(0x06054b50, 4) + le(0, 2) + le(0, 2) + le(0xFFFF, 2) +
                     le(0xFFFF, 2) + z.substr(z.size() - 10);
  refused(TorchCheckpointErrc::zip_malformed, many);  // sentinels without zip64 records
  std::string z64 = zip({{"archive/data.pkl", pkl}});
  // Patch the zip64 end record's two counts (it sits 56 + 20 + 22 bytes from the end).
  const size_t e64 = z64.size() - 22 - 20 - 56;
  z64.replace(e64 + 24, 16, le(2'000'000, 8) + le(2'000'000, 8));
  z64.replace(z64.size() - 22 + 8, 4, le(0xFFFF, 2) + le(0xFFFF, 2));
  EXPECT_CONTAINS(refused(TorchCheckpointErrc::zip_too_many_entries, z64), "2000000 entries");
  // zip64 and 32-bit end records that disagree.
  std::string off = zip({{"archive/data.pkl", pkl}});
  off.replace(off.size() - 22 - 20 - 56 + 32, 8, le(5, 8));
  refused(TorchCheckpointErrc::zip_malformed, off);
  // A central directory offset past the file.
  std::string far = zip({{"archive/data.pkl", pkl}}, {false, false});
  far.replace(far.size() - 6, 4, le(0x7FFFFFFF, 4));
  refused(TorchCheckpointErrc::zip_out_of_bounds, far);
}

TEST(TorchZip, EveryTruncationOfARealFileIsRefused) {
  const std::string bytes = read_bytes(data_dir() / "views.pt");
  ASSERT_GT(bytes.size(), 1000u);
  for (size_t n = 0; n < bytes.size(); ++n) {
    try {
      load(bytes.substr(0, n));
      ADD_FAILURE() << "a truncation to " << n << " bytes was accepted";
    } catch (const TorchCheckpointError& e) {
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
    }
  }
  // And every truncation of a real data.pkl inside an intact archive.
  const TorchZip z(as_bytes(bytes), "views.pt");
  const ZipEntry* pkl = z.find("views/data.pkl");
  ASSERT_NE(pkl, nullptr);
  const std::string pickle = bytes.substr(pkl->data_offset, pkl->size);
  std::vector<Member> records;
  for (const ZipEntry& e : z.entries())
    if (e.name.rfind("views/data/", 0) == 0)
      records.push_back({e.name.substr(11), bytes.substr(e.data_offset, e.size)});
  EXPECT_EQ(load(checkpoint(pickle, records))->tensors().size(), 5u);
  for (size_t n = 0; n < pickle.size(); ++n)
    refused(TorchCheckpointErrc::pickle_malformed, checkpoint(pickle.substr(0, n), records));
}

}  // namespace
}  // namespace stoke
