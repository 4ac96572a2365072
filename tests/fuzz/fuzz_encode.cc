// Arbitrary bytes as text (and as a pair) through both fixture tokenizers:
// never a crash, every id inside the vocabulary, truncation respected.
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>

#include "fuzz_support.h"
#include "text/tokenizer_loader.h"

namespace {
std::unique_ptr<stoke::Tokenizer> g_bert, g_xlmr;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = stoke::fuzz::fixtures_dir();
  g_bert = stoke::load_tokenizer(dir + "/models/tiny-bert");
  g_xlmr = stoke::load_tokenizer(dir + "/models/tiny-xlmr");
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoke;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Tokenizer* tok : {g_bert.get(), g_xlmr.get()}) {
    const Encoding whole = tok->encode(text, EncodeOptions{0, false});
    for (int32_t id : whole.ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    const Encoding pair = tok->encode(TextInput{text.substr(0, size / 2), text.substr(size / 2)}, EncodeOptions{16, true});
    if (pair.ids.size() > 16 || pair.ids.size() != pair.type_ids.size()) std::abort();
  }
  return 0;
}
