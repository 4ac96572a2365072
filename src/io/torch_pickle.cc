#include "io/torch_pickle.h"

#include <algorithm>
#include <bit>
#include <cctype>
#include <cstring>
#include <map>
#include <optional>
#include <unordered_map>

#include "core/utf8.h"

namespace stoke {

namespace {

// Values in the arena: a state dict needs about twenty per tensor, so four
// million is a 200,000-tensor model, and at under 100 bytes each the arena
// stays a few hundred MB at worst however the pickle is built.
constexpr size_t kMaxPickleValues = 1u << 22;
// A GLOBAL's module or name: real ones are a few dozen bytes.
constexpr size_t kMaxGlobalPart = 256;

// Opcodes (Python's Lib/pickle.py), by protocol.
enum Op : uint8_t {
  // protocol 0 and 1
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I', BININT = 'J',
  BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P', BINPERSID = 'Q', REDUCE = 'R',
  STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U', UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a',
  BUILD = 'b', GLOBAL = 'c', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i',
  LONG_BINGET = 'j', LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  // protocol 2
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85, TUPLE2 = 0x86, TUPLE3 = 0x87,
  NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  // protocol 3
  BINBYTES = 'B', SHORT_BINBYTES = 'C',
  // protocol 4
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90,
  FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
  // protocol 5
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

const char* op_name(uint8_t op) {
  switch (op) {
#define STOKE_OP(x) \
  case x: return #x;
    STOKE_OP(MARK) STOKE_OP(STOP) STOKE_OP(POP) STOKE_OP(POP_MARK) STOKE_OP(DUP) STOKE_OP(FLOAT) STOKE_OP(INT)
    STOKE_OP(BININT) STOKE_OP(BININT1) STOKE_OP(LONG) STOKE_OP(BININT2) STOKE_OP(NONE) STOKE_OP(PERSID)
    STOKE_OP(BINPERSID) STOKE_OP(REDUCE) STOKE_OP(STRING) STOKE_OP(BINSTRING) STOKE_OP(SHORT_BINSTRING)
    STOKE_OP(UNICODE) STOKE_OP(BINUNICODE) STOKE_OP(APPEND) STOKE_OP(BUILD) STOKE_OP(GLOBAL) STOKE_OP(DICT)
    STOKE_OP(EMPTY_DICT) STOKE_OP(APPENDS) STOKE_OP(GET) STOKE_OP(BINGET) STOKE_OP(INST) STOKE_OP(LONG_BINGET)
    STOKE_OP(LIST) STOKE_OP(EMPTY_LIST) STOKE_OP(OBJ) STOKE_OP(PUT) STOKE_OP(BINPUT) STOKE_OP(LONG_BINPUT)
    STOKE_OP(SETITEM) STOKE_OP(TUPLE) STOKE_OP(EMPTY_TUPLE) STOKE_OP(SETITEMS) STOKE_OP(BINFLOAT) STOKE_OP(PROTO)
    STOKE_OP(NEWOBJ) STOKE_OP(EXT1) STOKE_OP(EXT2) STOKE_OP(EXT4) STOKE_OP(TUPLE1) STOKE_OP(TUPLE2)
    STOKE_OP(TUPLE3) STOKE_OP(NEWTRUE) STOKE_OP(NEWFALSE) STOKE_OP(LONG1) STOKE_OP(LONG4) STOKE_OP(BINBYTES)
    STOKE_OP(SHORT_BINBYTES) STOKE_OP(SHORT_BINUNICODE) STOKE_OP(BINUNICODE8) STOKE_OP(BINBYTES8)
    STOKE_OP(EMPTY_SET) STOKE_OP(ADDITEMS) STOKE_OP(FROZENSET) STOKE_OP(NEWOBJ_EX) STOKE_OP(STACK_GLOBAL)
    STOKE_OP(MEMOIZE) STOKE_OP(FRAME) STOKE_OP(BYTEARRAY8) STOKE_OP(NEXT_BUFFER) STOKE_OP(READONLY_BUFFER)
#undef STOKE_OP
  }
  return nullptr;
}

// Why an opcode this reader knows is refused, or nullptr when it is read.
const char* refusal(uint8_t op) {
  switch (op) {
    case INST:
    case OBJ:
    case NEWOBJ:
    case NEWOBJ_EX: return "it creates an instance of a class";
    case EXT1:
    case EXT2:
    case EXT4: return "it names a global through the copyreg extension registry";
    case PERSID: return "a text persistent id (torch writes BINPERSID)";
    case INT:
    case LONG:
    case FLOAT:
    case STRING:
    case UNICODE:
    case GET:
    case PUT: return "a protocol-0 text opcode (torch.save writes protocol 2)";
    case EMPTY_SET:
    case ADDITEMS:
    case FROZENSET: return "sets are not read (a state dict holds none)";
    case BYTEARRAY8:
    case NEXT_BUFFER:
    case READONLY_BUFFER: return "out-of-band buffers are not read";
    default: return nullptr;
  }
}

// dtypes as globals: _rebuild_tensor_v3 names the element type of an
// UntypedStorage this way ("torch.uint16") for dtypes that have no typed
// storage class. Allowed as globals so that the checkpoint can name the dtype:
// which of them stoke reads is the checkpoint's decision.
constexpr std::string_view kDtypeNames[] = {
    "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8", "uint8", "bool", "uint16",
    "uint32", "uint64", "complex32", "complex64", "complex128", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "int1", "int2", "int3", "int4", "int5", "int6", "int7",
    "uint1", "uint2", "uint3", "uint4", "uint5", "uint6", "uint7", "bits1x8", "bits2x4", "bits4x2", "bits8",
    "bits16", "qint8", "quint8", "qint32", "quint4x2", "quint2x4"};

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  return !std::isdigit(static_cast<unsigned char>(s.front()));
}

std::string_view after_torch(std::string_view full) {
  constexpr std::string_view prefix = "torch.";
  return full.substr(0, prefix.size()) == prefix ? full.substr(prefix.size()) : std::string_view{};
}

}  // namespace

bool is_torch_storage_type(std::string_view full) {
  if (full == kUntypedStorage) return true;
  const std::string_view name = after_torch(full);
  return is_identifier(name) && name.size() > 7 && name.substr(name.size() - 7) == "Storage";
}

bool is_torch_dtype_global(std::string_view full) {
  const std::string_view name = after_torch(full);
  return std::find(std::begin(kDtypeNames), std::end(kDtypeNames), name) != std::end(kDtypeNames);
}

namespace {

constexpr std::string_view kOrderedDict = "collections.OrderedDict";
constexpr std::string_view kRebuildTensorV2 = "torch._utils._rebuild_tensor_v2";
constexpr std::string_view kRebuildTensorV3 = "torch._utils._rebuild_tensor_v3";
constexpr std::string_view kRebuildTensor = "torch._utils._rebuild_tensor";
constexpr std::string_view kRebuildParameter = "torch._utils._rebuild_parameter";

bool is_allowed_global(std::string_view full) {
  return full == kOrderedDict || full == kRebuildTensorV2 || full == kRebuildTensorV3 || full == kRebuildTensor ||
         full == kRebuildParameter || is_torch_storage_type(full) || is_torch_dtype_global(full);
}

class Machine {
 public:
  Machine(std::span<const std::byte> in, const std::string& label) : in_(in), label_(label) {
    // None, False and True are shared: pushing one allocates nothing.
    for (PickleKind k : {PickleKind::none, PickleKind::boolean, PickleKind::boolean}) out_.values.push_back(of(k));
    out_.values[kTrue].flag = true;
  }

  UnpickledData run() {
    uint64_t ops = 0;
    while (true) {
      if (pos_ >= in_.size()) {
        op_start_ = pos_;
        op_ = 0;
        throw fail(TorchCheckpointErrc::pickle_malformed, "the pickle ends without STOP");
      }
      if (++ops > kMaxPickleOps)
        throw fail(TorchCheckpointErrc::pickle_limit, "more than " + std::to_string(kMaxPickleOps) + " operations");
      op_start_ = pos_;
      op_ = byte();
      if (op_start_ == 0 && op_ != PROTO)
        throw fail(TorchCheckpointErrc::pickle_malformed,
                   "the pickle does not start with PROTO (protocol 0 and 1 pickles are not read; torch.save "
                   "writes protocol 2)");
      if (step()) break;
    }
    if (pos_ != in_.size())
      throw fail(TorchCheckpointErrc::pickle_malformed,
                 std::to_string(in_.size() - pos_) + " bytes after STOP (the record must end there)");
    return std::move(out_);
  }

 private:
  static constexpr uint32_t kNone = 0, kFalse = 1, kTrue = 2;

  static PickleValue of(PickleKind kind) {
    PickleValue v;
    v.kind = kind;
    return v;
  }
  static PickleValue reference(PickleKind kind, uint32_t ref) {
    PickleValue v = of(kind);
    v.ref = ref;
    return v;
  }

  TorchCheckpointError fail(TorchCheckpointErrc kind, const std::string& what) const {
    std::string where = label_ + " at byte " + std::to_string(op_start_);
    if (const char* name = op_name(op_)) where += std::string(" (") + name + ")";
    return TorchCheckpointError(kind, where + ": " + what);
  }

  // ---- reading operands: every length is checked against what remains
  void need(uint64_t n) const {
    if (in_.size() - pos_ < n)
      throw fail(TorchCheckpointErrc::pickle_malformed, "truncated: the operand needs " + std::to_string(n) +
                                                            " bytes but " + std::to_string(in_.size() - pos_) +
                                                            " remain");
  }
  uint8_t byte() { return static_cast<uint8_t>(in_[pos_++]); }
  uint64_t le(int n) {
    need(static_cast<uint64_t>(n));
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(in_[pos_ + static_cast<size_t>(i)]);
    pos_ += static_cast<size_t>(n);
    return v;
  }
  std::string_view take(uint64_t n) {
    need(n);
    std::string_view s(reinterpret_cast<const char*>(in_.data()) + pos_, static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return s;
  }
  // A GLOBAL operand: text up to '\n'.
  std::string_view line() {
    const size_t limit = std::min(in_.size() - pos_, kMaxGlobalPart + 1);
    const char* p = reinterpret_cast<const char*>(in_.data()) + pos_;
    const void* nl = std::memchr(p, '\n', limit);
    if (!nl) {
      if (limit > kMaxGlobalPart)
        throw fail(TorchCheckpointErrc::pickle_limit,
                   "a global's module or name longer than " + std::to_string(kMaxGlobalPart) + " bytes");
      throw fail(TorchCheckpointErrc::pickle_malformed, "truncated: the global's name has no end of line");
    }
    const size_t n = static_cast<size_t>(static_cast<const char*>(nl) - p);
    pos_ += n + 1;
    return {p, n};
  }

  // ---- the stack: values above the innermost MARK only
  size_t floor() const { return marks_.empty() ? 0 : marks_.back(); }
  uint32_t add(PickleValue v) {
    if (out_.values.size() >= kMaxPickleValues)
      throw fail(TorchCheckpointErrc::pickle_limit,
                 "more than " + std::to_string(kMaxPickleValues) + " values (a state dict needs far fewer)");
    out_.values.push_back(std::move(v));
    return static_cast<uint32_t>(out_.values.size() - 1);
  }
  void push(uint32_t v) {
    if (stack_.size() >= kMaxPickleStack)
      throw fail(TorchCheckpointErrc::pickle_limit, "more than " + std::to_string(kMaxPickleStack) + " values on the stack");
    stack_.push_back(v);
  }
  uint32_t& top() {
    if (stack_.size() <= floor()) throw fail(TorchCheckpointErrc::pickle_malformed, "the stack is empty");
    return stack_.back();
  }
  uint32_t pop() {
    const uint32_t v = top();
    stack_.pop_back();
    return v;
  }
  std::vector<uint32_t> pop_mark() {
    if (marks_.empty()) throw fail(TorchCheckpointErrc::pickle_malformed, "no MARK to take the values from");
    std::vector<uint32_t> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
    stack_.resize(marks_.back());
    marks_.pop_back();
    return items;
  }
  PickleValue& value(uint32_t i) { return out_.values[i]; }

  // A new tuple / list / dict over `items`, nested one deeper than its deepest item.
  uint32_t container(PickleKind kind, std::vector<uint32_t> items) {
    uint32_t depth = 0;
    for (uint32_t i : items) depth = std::max(depth, value(i).depth);
    check_depth(depth + 1);
    PickleValue v = of(kind);
    v.items = std::move(items);
    v.depth = depth + 1;
    return add(std::move(v));
  }
  void check_depth(uint64_t depth) const {
    if (depth > kMaxPickleDepth)
      throw fail(TorchCheckpointErrc::pickle_limit, "containers nested more than " + std::to_string(kMaxPickleDepth) +
                                                        " deep (a state dict nests three)");
  }
  // Adds items to the list or dict on top of the stack (APPEND, SETITEM, ...).
  void extend(PickleKind want, const std::vector<uint32_t>& items) {
    PickleValue& target = value(top());
    if (target.kind != want)
      throw fail(TorchCheckpointErrc::pickle_malformed, std::string("adds items to ") + pickle_kind_name(target.kind) +
                                                            " (expected " + pickle_kind_name(want) + ")");
    if (want == PickleKind::dict && items.size() % 2 != 0)
      throw fail(TorchCheckpointErrc::pickle_malformed, "an odd number of values for a dict's keys and values");
    uint32_t depth = target.depth;
    for (uint32_t i : items) depth = std::max(depth, value(i).depth + 1);
    check_depth(depth);
    target.items.insert(target.items.end(), items.begin(), items.end());
    target.depth = depth;
  }

  uint32_t string_value(std::string_view s, PickleKind kind) {
    if (kind == PickleKind::string && !utf8_is_valid(s))
      throw fail(TorchCheckpointErrc::pickle_malformed, "a string that is not valid UTF-8");
    PickleValue v = of(kind);
    v.text = s;
    return add(std::move(v));
  }
  uint32_t integer(int64_t i) {
    PickleValue v = of(PickleKind::integer);
    v.integer = i;
    return add(std::move(v));
  }
  // LONG1 / LONG4: little-endian two's complement of n bytes; stoke's values fit 64 bits.
  uint32_t long_value(uint64_t n) {
    if (n > 8)
      throw fail(TorchCheckpointErrc::pickle_limit,
                 "an integer of " + std::to_string(n) + " bytes (more than 64 bits; no tensor field needs one)");
    const std::string_view b = take(n);
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = (v << 8) | static_cast<uint8_t>(b[i]);
    if (n > 0 && n < 8 && (static_cast<uint8_t>(b[n - 1]) & 0x80)) v |= ~uint64_t{0} << (8 * n);  // sign-extend
    return integer(static_cast<int64_t>(v));
  }

  uint32_t global(std::string_view module, std::string_view name) {
    const std::string full = std::string(module) + "." + std::string(name);
    if (!is_allowed_global(full))
      throw fail(TorchCheckpointErrc::refused_global,
                 "refused global " + (is_identifier_path(module) && is_identifier(name) ? full : torch_quote(full)) +
                     ": only tensors and plain containers are read");
    PickleValue v = of(PickleKind::global);
    v.text = full;
    return add(std::move(v));
  }
  static bool is_identifier_path(std::string_view s) {
    size_t start = 0;
    while (true) {
      const size_t dot = s.find('.', start);
      if (!is_identifier(s.substr(start, dot == std::string_view::npos ? std::string_view::npos : dot - start)))
        return false;
      if (dot == std::string_view::npos) return true;
      start = dot + 1;
    }
  }

  void memo_put(uint64_t index) {
    if (index >= kMaxPickleMemoIndex)
      throw fail(TorchCheckpointErrc::pickle_limit, "memo index " + std::to_string(index) + " (limit " +
                                                        std::to_string(kMaxPickleMemoIndex) + ")");
    memo_[index] = top();
  }
  void memo_get(uint64_t index) {
    auto it = memo_.find(index);
    if (it == memo_.end())
      throw fail(TorchCheckpointErrc::pickle_malformed, "memo index " + std::to_string(index) + " was never stored");
    push(it->second);
  }

  // ---- the calls torch writes, checked argument by argument
  const PickleValue& arg(const PickleValue& args, size_t i) { return value(args.items[i]); }
  [[noreturn]] void bad_arg(const std::string& fn, size_t i, const char* what, const PickleValue& v) {
    throw fail(TorchCheckpointErrc::pickle_malformed, fn + ": argument " + std::to_string(i + 1) + " (" + what +
                                                          ") is " + pickle_kind_name(v.kind));
  }
  std::vector<int64_t> int_tuple(const std::string& fn, const PickleValue& args, size_t i, const char* what) {
    const PickleValue& t = arg(args, i);
    if (t.kind != PickleKind::tuple) bad_arg(fn, i, what, t);
    std::vector<int64_t> out;
    out.reserve(t.items.size());
    for (uint32_t k : t.items) {
      const PickleValue& d = value(k);
      if (d.kind != PickleKind::integer)
        throw fail(TorchCheckpointErrc::pickle_malformed,
                   fn + ": argument " + std::to_string(i + 1) + " (" + what + ") holds " + pickle_kind_name(d.kind));
      out.push_back(d.integer);
    }
    return out;
  }
  void expect_no_hooks(const std::string& fn, const PickleValue& args, size_t i) {
    const PickleValue& h = arg(args, i);
    if (h.kind != PickleKind::dict) bad_arg(fn, i, "backward_hooks", h);
    if (!h.items.empty())
      throw fail(TorchCheckpointErrc::refused_call, fn + ": the tensor has backward hooks (functions are not read)");
  }

  // _rebuild_tensor(storage, offset, size, stride)
  // _rebuild_tensor_v2(storage, offset, size, stride, requires_grad, hooks[, metadata])
  // _rebuild_tensor_v3(untyped storage, offset, size, stride, requires_grad, hooks, dtype[, metadata])
  uint32_t rebuild_tensor(const std::string& fn, const PickleValue& args) {
    const size_t n = args.items.size();
    const size_t fixed = fn == kRebuildTensor ? 4 : fn == kRebuildTensorV2 ? 6 : 7;
    const bool optional_metadata = fn != kRebuildTensor;
    if (n != fixed && !(optional_metadata && n == fixed + 1))
      throw fail(TorchCheckpointErrc::pickle_malformed,
                 fn + " called with " + std::to_string(n) + " arguments (expected " + std::to_string(fixed) +
                     (optional_metadata ? " or " + std::to_string(fixed + 1) : "") + ")");
    PickleTensor t;
    const PickleValue& storage = arg(args, 0);
    if (storage.kind != PickleKind::storage) bad_arg(fn, 0, "storage", storage);
    t.storage = storage.ref;
    const PickleValue& offset = arg(args, 1);
    if (offset.kind != PickleKind::integer) bad_arg(fn, 1, "storage_offset", offset);
    t.storage_offset = offset.integer;
    t.shape = int_tuple(fn, args, 2, "size");
    t.stride = int_tuple(fn, args, 3, "stride");
    if (fn != kRebuildTensor) {
      if (arg(args, 4).kind != PickleKind::boolean) bad_arg(fn, 4, "requires_grad", arg(args, 4));
      expect_no_hooks(fn, args, 5);
    }
    if (fn == kRebuildTensorV3) {
      const PickleValue& dtype = arg(args, 6);
      if (dtype.kind != PickleKind::global || !is_torch_dtype_global(dtype.text)) bad_arg(fn, 6, "dtype", dtype);
      t.dtype = dtype.text;
    }
    if (n == fixed + 1) {
      // Python-level tensor metadata (conj / neg bits and the like) changes what the bytes mean.
      const PickleValue& m = arg(args, fixed);
      if (!(m.kind == PickleKind::none || (m.kind == PickleKind::dict && m.items.empty())))
        throw fail(TorchCheckpointErrc::refused_call, fn + ": tensor metadata (" + pickle_kind_name(m.kind) +
                                                          ") is not read");
    }
    out_.tensors.push_back(std::move(t));
    return add(reference(PickleKind::tensor, static_cast<uint32_t>(out_.tensors.size() - 1)));
  }

  uint32_t rebuild_parameter(const std::string& fn, const PickleValue& args) {
    if (args.items.size() != 3)
      throw fail(TorchCheckpointErrc::pickle_malformed,
                 fn + " called with " + std::to_string(args.items.size()) + " arguments (expected 3)");
    const PickleValue& data = arg(args, 0);
    if (data.kind != PickleKind::tensor) bad_arg(fn, 0, "data", data);
    if (arg(args, 1).kind != PickleKind::boolean) bad_arg(fn, 1, "requires_grad", arg(args, 1));
    expect_no_hooks(fn, args, 2);
    out_.tensors[data.ref].parameter = true;
    return add(reference(PickleKind::tensor, data.ref));
  }

  void reduce() {
    const uint32_t args_index = pop();
    const PickleValue& callee = value(top());
    const PickleValue args = value(args_index);  // a copy: the calls below grow the arena
    if (callee.kind != PickleKind::global)
      throw fail(TorchCheckpointErrc::refused_call,
                 std::string("REDUCE of ") + pickle_kind_name(callee.kind) + " (only allowed globals are called)");
    const std::string fn = callee.text;
    if (args.kind != PickleKind::tuple)
      throw fail(TorchCheckpointErrc::pickle_malformed, fn + " called with " + pickle_kind_name(args.kind) +
                                                            " for its arguments (expected a tuple)");
    uint32_t result;
    if (fn == kOrderedDict) {
      if (!args.items.empty())
        throw fail(TorchCheckpointErrc::refused_call,
                   fn + " called with " + std::to_string(args.items.size()) + " arguments (torch.save writes ())");
      result = add(of(PickleKind::dict));
    } else if (fn == kRebuildTensorV2 || fn == kRebuildTensorV3 || fn == kRebuildTensor) {
      result = rebuild_tensor(fn, args);
    } else if (fn == kRebuildParameter) {
      result = rebuild_parameter(fn, args);
    } else {
      throw fail(TorchCheckpointErrc::refused_call,
                 "REDUCE of " + fn + ": storage types and dtypes are not called (they are arguments of a tensor)");
    }
    top() = result;
  }

  void build() {
    const uint32_t state = pop();
    const PickleValue& target = value(top());
    // model.state_dict()'s OrderedDict carries `_metadata` (module versions) as an attribute.
    if (target.kind == PickleKind::dict && value(state).kind == PickleKind::dict) return;
    throw fail(TorchCheckpointErrc::refused_call, std::string("BUILD of ") + pickle_kind_name(target.kind) + " with " +
                                                      pickle_kind_name(value(state).kind) +
                                                      " (only an OrderedDict's attributes are read, and ignored)");
  }

  void persistent_load() {
    const PickleValue& pid = value(pop());
    auto field = [&](size_t i) -> const PickleValue& { return value(pid.items[i]); };
    const char* expected = "(expected ('storage', storage type, key, location, numel))";
    if (pid.kind != PickleKind::tuple || pid.items.size() != 5)
      throw fail(TorchCheckpointErrc::refused_call,
                 std::string("a persistent id that is ") + pickle_kind_name(pid.kind) +
                     (pid.kind == PickleKind::tuple ? " of " + std::to_string(pid.items.size()) + " values " : " ") +
                     expected);
    if (field(0).kind != PickleKind::string || field(0).text != "storage")
      throw fail(TorchCheckpointErrc::refused_call, "a persistent id that is not a storage " + std::string(expected));
    if (field(1).kind != PickleKind::global || !is_torch_storage_type(field(1).text))
      throw fail(TorchCheckpointErrc::refused_call,
                 std::string("a persistent id whose storage type is ") +
                     (field(1).kind == PickleKind::global ? field(1).text : pickle_kind_name(field(1).kind)) + " " +
                     expected);
    if (field(2).kind != PickleKind::string || field(3).kind != PickleKind::string ||
        field(4).kind != PickleKind::integer || field(4).integer < 0)
      throw fail(TorchCheckpointErrc::refused_call,
                 "a storage persistent id with a bad key, location or numel " + std::string(expected));
    PickleStorage s{field(1).text, field(2).text, field(3).text, field(4).integer};
    auto [it, inserted] = storage_by_key_.emplace(s.key, static_cast<uint32_t>(out_.storages.size()));
    if (inserted) {
      out_.storages.push_back(std::move(s));
    } else {
      // Tensors sharing a storage name it again; it must be the same storage.
      const PickleStorage& first = out_.storages[it->second];
      if (first.type != s.type || first.numel != s.numel)
        throw fail(TorchCheckpointErrc::storage_conflict,
                   "storage " + torch_quote(s.key) + " is " + s.type + " of " + std::to_string(s.numel) +
                       " elements here but " + first.type + " of " + std::to_string(first.numel) + " before");
    }
    push(add(reference(PickleKind::storage, it->second)));
  }

  // One opcode; true at STOP.
  bool step() {
    switch (op_) {
      case PROTO: {
        const uint64_t v = le(1);
        if (op_start_ != 0) throw fail(TorchCheckpointErrc::pickle_malformed, "PROTO after the first opcode");
        if (v < 2 || v > 5)
          throw fail(TorchCheckpointErrc::pickle_malformed,
                     "pickle protocol " + std::to_string(v) + " (torch.save writes 2; stoke reads 2 to 5)");
        return false;
      }
      case FRAME: {
        const uint64_t n = le(8);
        if (n > in_.size() - pos_)
          throw fail(TorchCheckpointErrc::pickle_malformed, "a frame of " + std::to_string(n) + " bytes with " +
                                                                std::to_string(in_.size() - pos_) + " remaining");
        return false;
      }
      case STOP: {
        if (!marks_.empty()) throw fail(TorchCheckpointErrc::pickle_malformed, "STOP inside an unclosed MARK");
        if (stack_.size() != 1)
          throw fail(TorchCheckpointErrc::pickle_malformed,
                     "STOP with " + std::to_string(stack_.size()) + " values on the stack (expected one)");
        out_.root = stack_.back();
        return true;
      }
      case MARK:
        if (marks_.size() >= kMaxPickleDepth)
          throw fail(TorchCheckpointErrc::pickle_limit, "MARKs nested more than " + std::to_string(kMaxPickleDepth) +
                                                            " deep (a state dict nests three)");
        marks_.push_back(stack_.size());
        return false;
      case POP: pop(); return false;
      case POP_MARK: pop_mark(); return false;
      case DUP: push(top()); return false;
      case NONE: push(kNone); return false;
      case NEWTRUE: push(kTrue); return false;
      case NEWFALSE: push(kFalse); return false;
      case BININT: push(integer(static_cast<int32_t>(static_cast<uint32_t>(le(4))))); return false;
      case BININT1: push(integer(static_cast<int64_t>(le(1)))); return false;
      case BININT2: push(integer(static_cast<int64_t>(le(2)))); return false;
      case LONG1: push(long_value(le(1))); return false;
      case LONG4: {
        const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
        if (n < 0) throw fail(TorchCheckpointErrc::pickle_malformed, "a negative length");
        push(long_value(static_cast<uint64_t>(n)));
        return false;
      }
      case BINFLOAT: {
        const std::string_view b = take(8);
        uint64_t bits = 0;
        for (char c : b) bits = (bits << 8) | static_cast<uint8_t>(c);  // big-endian
        PickleValue v = of(PickleKind::floating);
        v.floating = std::bit_cast<double>(bits);
        push(add(std::move(v)));
        return false;
      }
      case SHORT_BINUNICODE: push(string_value(take(le(1)), PickleKind::string)); return false;
      case BINUNICODE: push(string_value(take(le(4)), PickleKind::string)); return false;
      case BINUNICODE8: push(string_value(take(le(8)), PickleKind::string)); return false;
      case SHORT_BINSTRING: push(string_value(take(le(1)), PickleKind::string)); return false;
      case BINSTRING: {
        const auto n = static_cast<int32_t>(static_cast<uint32_t>(le(4)));
        if (n < 0) throw fail(TorchCheckpointErrc::pickle_malformed, "a negative length");
        push(string_value(take(static_cast<uint64_t>(n)), PickleKind::string));
        return false;
      }
      case SHORT_BINBYTES: push(string_value(take(le(1)), PickleKind::bytes)); return false;
      case BINBYTES: push(string_value(take(le(4)), PickleKind::bytes)); return false;
      case BINBYTES8: push(string_value(take(le(8)), PickleKind::bytes)); return false;
      case EMPTY_TUPLE: push(container(PickleKind::tuple, {})); return false;
      case TUPLE: push(container(PickleKind::tuple, pop_mark())); return false;
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const size_t n = op_ - TUPLE1 + 1;
        std::vector<uint32_t> items(n);
        for (size_t i = n; i-- > 0;) items[i] = pop();
        push(container(PickleKind::tuple, std::move(items)));
        return false;
      }
      case EMPTY_LIST: push(container(PickleKind::list, {})); return false;
      case LIST: push(container(PickleKind::list, pop_mark())); return false;
      case APPEND: {
        const uint32_t item = pop();
        extend(PickleKind::list, {item});
        return false;
      }
      case APPENDS: extend(PickleKind::list, pop_mark()); return false;
      case EMPTY_DICT: push(container(PickleKind::dict, {})); return false;
      case DICT: {
        std::vector<uint32_t> items = pop_mark();
        if (items.size() % 2 != 0)
          throw fail(TorchCheckpointErrc::pickle_malformed, "an odd number of values for a dict's keys and values");
        push(container(PickleKind::dict, std::move(items)));
        return false;
      }
      case SETITEM: {
        const uint32_t v = pop();
        const uint32_t k = pop();
        extend(PickleKind::dict, {k, v});
        return false;
      }
      case SETITEMS: extend(PickleKind::dict, pop_mark()); return false;
      case BINGET: memo_get(le(1)); return false;
      case LONG_BINGET: memo_get(le(4)); return false;
      case BINPUT: memo_put(le(1)); return false;
      case LONG_BINPUT: memo_put(le(4)); return false;
      case MEMOIZE: memo_put(memo_.size()); return false;
      case GLOBAL: {
        const std::string_view module = line();
        const std::string_view name = line();
        push(global(module, name));
        return false;
      }
      case STACK_GLOBAL: {
        const PickleValue& name = value(pop());
        const PickleValue& module = value(pop());
        if (name.kind != PickleKind::string || module.kind != PickleKind::string)
          throw fail(TorchCheckpointErrc::pickle_malformed, "STACK_GLOBAL of values that are not strings");
        push(global(module.text, name.text));
        return false;
      }
      case REDUCE: reduce(); return false;
      case BUILD: build(); return false;
      case BINPERSID: persistent_load(); return false;
      default: break;
    }
    if (const char* why = refusal(op_))
      throw fail(TorchCheckpointErrc::pickle_refused_opcode, std::string("opcode ") + op_name(op_) + " is refused: " +
                                                                 why + "; only tensors and plain containers are read");
    static const char* hex = "0123456789abcdef";
    throw fail(TorchCheckpointErrc::pickle_refused_opcode,
               std::string("unknown opcode 0x") + hex[op_ >> 4] + hex[op_ & 15] + " (not a pickle torch.save writes)");
  }

  std::span<const std::byte> in_;
  const std::string& label_;
  size_t pos_ = 0;
  size_t op_start_ = 0;
  uint8_t op_ = 0;
  UnpickledData out_;
  std::vector<uint32_t> stack_;
  std::vector<size_t> marks_;  // stack sizes at each open MARK
  std::unordered_map<uint64_t, uint32_t> memo_;
  std::map<std::string, uint32_t, std::less<>> storage_by_key_;
};

}  // namespace

const char* pickle_kind_name(PickleKind k) {
  switch (k) {
    case PickleKind::none: return "None";
    case PickleKind::boolean: return "a bool";
    case PickleKind::integer: return "an integer";
    case PickleKind::floating: return "a float";
    case PickleKind::string: return "a string";
    case PickleKind::bytes: return "bytes";
    case PickleKind::tuple: return "a tuple";
    case PickleKind::list: return "a list";
    case PickleKind::dict: return "a dict";
    case PickleKind::global: return "a global";
    case PickleKind::storage: return "a storage";
    case PickleKind::tensor: return "a tensor";
  }
  return "a value";
}

UnpickledData unpickle_restricted(std::span<const std::byte> pickle, const std::string& label) {
  return Machine(pickle, label).run();
}

}  // namespace stoke
