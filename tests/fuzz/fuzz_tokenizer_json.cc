// tokenizer.json bytes -> load -> encode. Unsupported or malformed files must
// be a clear stoke::Error; a loaded tokenizer keeps every id < vocab_size().
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "text/tokenizer_loader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoke;
  try {
    auto tok = load_tokenizer_json(std::string(reinterpret_cast<const char*>(data), size), "fuzz-tokenizer.json");
    for (const char* text : {"hello world", "[CLS] x [SEP] Ünïcödé 東京", ""}) {
      const Encoding enc = tok->encode(TextInput{text, std::string_view("pair text")}, EncodeOptions{32, true});
      for (int32_t id : enc.ids)
        if (id < 0 || id >= tok->vocab_size()) std::abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
