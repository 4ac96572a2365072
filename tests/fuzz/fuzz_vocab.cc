// vocab.txt bytes -> a WordPiece tokenizer -> encode a few texts. Any bytes
// must give a clear stoke::Error or a tokenizer whose ids stay in range.
#include <cstdint>
#include <cstdlib>
#include <string>

#include "core/error.h"
#include "text/tokenizer.h"
#include "text/wordpiece.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace stoke;
  try {
    auto vocab = parse_vocab_txt(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz-vocab.txt");
    const int64_t n = static_cast<int64_t>(vocab.size());
    auto model = std::make_unique<WordPieceModel>(std::move(vocab), BertNormalizerOptions{}, WordPieceOptions{});
    PostProcessor post;
    post.single = {TemplatePiece{true, 0, {}, 0}};
    Tokenizer tok(TokenizerKind::wordpiece, std::move(model), AddedTokenMatcher(), post, 0, 0);
    for (const char* text : {"hello world", "Ünïcödé 東京 ##ab a##b", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}) {
      for (int32_t id : tok.encode(text).ids)
        if (id < 0 || id >= n) std::abort();
    }
  } catch (const Error&) {
  }
  return 0;
}
