// A restricted unpickler for torch.save's data.pkl: it reads what
// torch.load(weights_only=True) reads for a state dict and runs no code.
//
// The pickle is a program for a stack machine; Python's unpickler will call
// any function a GLOBAL names. This one is a data reader: it knows the opcodes
// that push plain values (protocol 2, which torch.save writes by default, and
// the protocol 3-5 ones a pickle_protocol=4/5 save adds: FRAME,
// SHORT_BINUNICODE, BINUNICODE8, MEMOIZE, STACK_GLOBAL, BINBYTES), and it
// resolves globals by name against a fixed allow list, calling nothing:
//   collections.OrderedDict                 REDUCE with () -> an empty dict
//   torch._utils._rebuild_tensor_v2         REDUCE -> a tensor reference (typed storage)
//   torch._utils._rebuild_tensor_v3         REDUCE -> a tensor reference (untyped storage + dtype:
//                                            what torch writes for uint16/32/64, float8, ...)
//   torch._utils._rebuild_tensor            REDUCE -> a tensor reference (older files)
//   torch._utils._rebuild_parameter         REDUCE -> the tensor, marked a Parameter
//   torch.<Type>Storage, torch.storage.UntypedStorage   a storage type, only inside a persistent id
//   torch.<dtype> (torch.uint16, ...)       a dtype, only as _rebuild_tensor_v3's argument
//   and BINPERSID of ('storage', type, key, location, numel) -> a storage reference.
// BUILD is read only on a dict with a dict state (the `_metadata` attribute
// of model.state_dict()'s OrderedDict, which is ignored). Every other global,
// a REDUCE or BUILD of anything else, INST / OBJ / NEWOBJ / EXT* and the text
// opcodes of protocol 0 are refused with one line naming the global or opcode.
//
// Bounded by the input: no value is ever visited recursively (the tree is an
// arena of indices), marks and containers nest at most kMaxPickleDepth deep,
// the stack and memo are capped, and every length is checked against the
// bytes that remain before anything is allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/torch_checkpoint_error.h"

namespace stoke {

// A state dict nests three deep (dict -> rebuild args -> size tuple);
// anything near this limit is not a state dict.
constexpr size_t kMaxPickleDepth = 100;
constexpr size_t kMaxPickleStack = 1u << 20;       // values on the stack (all marks together)
constexpr uint64_t kMaxPickleMemoIndex = 1u << 24; // BINPUT / LONG_BINPUT / MEMOIZE slots
constexpr uint64_t kMaxPickleOps = 1u << 28;

enum class PickleKind : uint8_t {
  none,
  boolean,
  integer,
  floating,
  string,
  bytes,
  tuple,
  list,
  dict,     // dict or collections.OrderedDict (items in insertion order, as pairs)
  global,   // an allowed global, by name ("torch.FloatStorage"); never a value of the result's leaves
  storage,  // a storage reference (index into UnpickledData::storages)
  tensor,   // a tensor reference (index into UnpickledData::tensors)
};

const char* pickle_kind_name(PickleKind k);  // "a tuple", "a string", ...

struct PickleValue {
  PickleKind kind = PickleKind::none;
  bool flag = false;                // boolean value
  int64_t integer = 0;              // integer value
  double floating = 0;              // floating value
  std::string text;                 // string / bytes contents, or the global's dotted name
  std::vector<uint32_t> items;      // tuple / list elements; dict keys and values, alternating
  uint32_t ref = 0;                 // storage / tensor index
  uint32_t depth = 0;               // containers nested inside this one (0 for scalars)
};

constexpr std::string_view kUntypedStorage = "torch.storage.UntypedStorage";

// ('storage', <type>, key, location, numel): the record data/<key> of the archive.
struct PickleStorage {
  std::string type;      // the global's dotted name: "torch.FloatStorage", kUntypedStorage, ...
  std::string key;       // the record's name under <archive>/data/
  std::string location;  // "cpu", "cuda:0", ...: where it lived, not where it goes
  int64_t numel = 0;     // elements of a typed storage, bytes of an untyped one, as the writer counted
};

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, hooks) and its kin.
struct PickleTensor {
  uint32_t storage = 0;  // index into UnpickledData::storages
  int64_t storage_offset = 0;  // in elements
  std::vector<int64_t> shape, stride;
  std::string dtype;       // _rebuild_tensor_v3's dtype global ("torch.uint16"); "" when the storage's type says
  bool parameter = false;  // came through _rebuild_parameter
};

// "torch.FloatStorage", ..., and kUntypedStorage.
bool is_torch_storage_type(std::string_view dotted_name);
// "torch.float32", "torch.uint16", "torch.float8_e4m3fn", ...: torch's dtype names.
bool is_torch_dtype_global(std::string_view dotted_name);

struct UnpickledData {
  std::vector<PickleValue> values;  // the arena; items and root index into it
  std::vector<PickleStorage> storages;  // one per distinct key
  std::vector<PickleTensor> tensors;
  uint32_t root = 0;
};

// Runs the restricted machine over `pickle` (all of it: bytes after STOP are
// refused). `label` names the record in messages ("x.pt: archive/data.pkl").
// Throws TorchCheckpointError.
UnpickledData unpickle_restricted(std::span<const std::byte> pickle, const std::string& label);

}  // namespace stoke
