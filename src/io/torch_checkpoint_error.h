// Errors of PyTorch checkpoints (torch.save's zip of a pickle and raw storages):
// one kind per check, shared by the zip reader (io/torch_zip.h), the restricted
// unpickler (io/torch_pickle.h) and the state-dict reader (io/torch_checkpoint.h),
// so tests and the CLI can tell the cases apart as they do for SafetensorsErrc.
//
// Checkpoints come from the internet: every message names the file, and the
// entry, opcode, global or tensor that failed, in one line.
#pragma once

#include <string>
#include <string_view>

#include "core/error.h"

namespace stoke {

enum class TorchCheckpointErrc {
  // the container
  not_zip,               // no zip end-of-central-directory record (not torch.save's format)
  legacy_format,         // a bare pickle: torch.save before PyTorch 1.6 (or _use_new_zipfile_serialization=False)
  zip_out_of_bounds,     // an offset or size of the zip points past the file (or past the central directory)
  zip_malformed,         // a bad signature, multi-disk or encrypted archive, local / central headers that disagree
  zip_compressed,        // an entry that is not STORED: torch never compresses (refusing zip bombs by construction)
  zip_bad_name,          // an entry name that is empty, absolute, has "..", a backslash, NUL or is not UTF-8
  zip_duplicate_name,    // two entries with one name
  zip_overlap,           // two entries share bytes
  zip_too_many_entries,  // more entries than kMaxZipEntries
  crc_mismatch,          // a checked record's bytes do not match its CRC-32
  bad_layout,            // entries outside the archive folder, or byteorder holding something else
  missing_record,        // no <archive>/data.pkl, or a storage with no <archive>/data/<key>
  big_endian,            // <archive>/byteorder says "big": stoke reads little-endian storages only
  // the pickle
  pickle_malformed,      // truncated, stack underflow, wrong operand types, bytes after STOP, ...
  pickle_refused_opcode, // an opcode that builds objects or runs code (INST, OBJ, NEWOBJ, EXT1, ...), or unknown
  refused_global,        // a GLOBAL / STACK_GLOBAL not on the allow list (posix.system, ...)
  refused_call,          // a REDUCE / BUILD / persistent id that is not a tensor rebuild, a storage or an OrderedDict
  pickle_limit,          // nesting depth, stack size, memo index or operation count over its limit
  // the state dict
  not_state_dict,        // the top-level object is not a flat dict of name -> tensor
  duplicate_name,        // one tensor name twice in the state dict
  unknown_dtype,         // a storage type stoke has no DType for (complex, quantized, float8, ...)
  bad_shape,             // a negative dimension, strides that do not match the shape, numel overflowing 64 bits
  not_contiguous,        // strides that are not row-major contiguous
  storage_out_of_range,  // storage_offset + numel past the end of the storage
  storage_size_mismatch, // a data record whose size is not numel x element size of its storage
  storage_conflict,      // one storage key given two different types or sizes
  io,                    // the OS could not open / map the file
};

const char* torch_checkpoint_errc_name(TorchCheckpointErrc e);

class TorchCheckpointError : public Error {
 public:
  TorchCheckpointError(TorchCheckpointErrc kind, const std::string& message);
  TorchCheckpointErrc kind() const { return kind_; }

 private:
  TorchCheckpointErrc kind_;
};

// A name or value from the file for a message: quoted, control bytes escaped,
// cut to a readable length (a hostile name may be megabytes).
std::string torch_quote(std::string_view s);

}  // namespace stoke
