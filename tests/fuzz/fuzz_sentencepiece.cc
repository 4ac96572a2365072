// SentencePiece model bytes -> load -> encode. A model the library rejects is
// a clear stoke::Error; a loaded one keeps ids inside the fairseq vocabulary.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "text/encode_stats.h"
#include "text/sentencepiece_model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoke;
  try {
    auto model = SentencePieceModel::from_bytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz.model");
    std::vector<int32_t> ids;
    EncodeStats stats;
    model->encode("hello world, Ünïcödé 東京 🍕🍕🍕", ids, stats);
    for (int32_t id : ids)
      if (id < 0 || id >= model->vocab_size()) std::abort();
  } catch (const Error&) {
  }
  return 0;
}
