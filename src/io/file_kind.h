// What a file is, from its first bytes (and its name only where bytes cannot
// tell): enough to say "that is a PyTorch pickle" or "that is a .npy array"
// instead of parsing a file as the wrong format and reporting nonsense such as
// a 379-terabyte safetensors header.
#pragma once

#include <filesystem>
#include <string>

namespace stoke {

enum class FileKind {
  empty,        // no bytes
  safetensors,  // an 8-byte header length that fits the file, then '{'; or named *.safetensors
  npy,          // "\x93NUMPY"
  npz,          // a zip whose first member is a .npy (numpy.savez)
  torch_zip,    // a zip holding data.pkl (torch.save since PyTorch 1.6: .pt, .bin)
  zip,          // any other zip
  pickle,       // a bare pickle, protocol 2-5 (PyTorch's legacy .bin/.pt)
  gguf,         // "GGUF" (llama.cpp)
  hdf5,         // "\x89HDF\r\n\x1a\n" (Keras / TensorFlow .h5)
  onnx,         // named *.onnx (protobuf has no magic bytes)
  msgpack,      // named *.msgpack (Flax weights)
  json,         // UTF-8 text starting with '{' or '['
  jsonl,        // JSON Lines: named *.jsonl / *.ndjson, or several lines each an object
  text,         // other UTF-8 text without NUL bytes
  binary,       // none of the above
};

struct FileSniff {
  FileKind kind = FileKind::binary;
  // One phrase for the user: "a PyTorch checkpoint (torch.save's zip of
  // pickles, .pt/.bin)", "binary data (first bytes 7f 45 4c 46)".
  std::string description;
};

// Reads at most the first 4 KiB of a regular file. Throws Error(io) when it
// cannot be opened or read (the caller checks that it is a regular file: a
// FIFO would block).
FileSniff sniff_file(const std::filesystem::path& path);

}  // namespace stoke
