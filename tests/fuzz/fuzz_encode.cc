// Arbitrary bytes as text (and as a pair) through both fixture tokenizers and
// the Unigram and byte-level BPE golden folders (tests/golden/tokenizers, found
// from the repository root, where the corpus replay runs; skipped elsewhere):
// never a crash, every id inside the vocabulary, truncation respected; offsets
// (TEI's /tokenize) inside the text, one per id, the ids those of tokenize().
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_support.h"
#include "text/tokenizer_loader.h"

namespace {
std::vector<std::unique_ptr<stoke::Tokenizer>> g_tokenizers;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const std::string dir = stoke::fuzz::fixtures_dir();
  g_tokenizers.push_back(stoke::load_tokenizer(dir + "/models/tiny-bert"));
  g_tokenizers.push_back(stoke::load_tokenizer(dir + "/models/tiny-xlmr"));
  for (const char* golden : {"tests/golden/tokenizers/xlmr-added", "tests/golden/tokenizers/roberta",
                             "tests/golden/tokenizers/camembert", "tests/golden/tokenizers/qwen3"})
    if (std::filesystem::exists(std::string(golden) + "/tokenizer.json"))
      g_tokenizers.push_back(stoke::load_tokenizer(golden));
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoke;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& tok : g_tokenizers) {
    const Encoding whole = tok->encode(text, EncodeOptions{0, false});
    for (int32_t id : whole.ids)
      if (id < 0 || id >= tok->vocab_size()) std::abort();
    const Encoding pair = tok->encode(TextInput{text.substr(0, size / 2), text.substr(size / 2)}, EncodeOptions{16, true});
    if (pair.ids.size() > 16 || pair.ids.size() != pair.type_ids.size()) std::abort();
    if (const auto spans = tok->tokenize_with_offsets(text)) {
      if (spans->ids.size() != spans->offsets.size() || spans->ids != tok->tokenize(text)) std::abort();
      for (const TokenOffset& o : spans->offsets)
        if (o.start > o.end || o.end > size) std::abort();
    }
  }
  return 0;
}
