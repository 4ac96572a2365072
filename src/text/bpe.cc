#include "text/bpe.h"

#include <cstdio>
#include <queue>

#include "core/error.h"

namespace stoke {

namespace {

std::atomic<uint64_t> next_cache_owner{1};

// Looked up by string_view, so a cache hit allocates nothing.
struct ViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

struct WordCache {
  uint64_t owner = 0;
  std::unordered_map<std::string, std::vector<int32_t>, ViewHash, std::equal_to<>> words;
};

// One cache per thread: tokenizer pools share the model, and a shared cache
// would need a lock on every word.
WordCache& thread_cache(uint64_t owner) {
  thread_local WordCache cache;
  if (cache.owner != owner) {
    cache.words.clear();
    cache.owner = owner;
  }
  return cache;
}

size_t char_length(unsigned char b) { return b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

}  // namespace

BpeModel::BpeModel(std::unordered_map<std::string, int32_t> vocab,
                   const std::vector<std::pair<std::string, std::string>>& merges, BpeOptions options,
                   const std::string& label)
    : vocab_(vocab.begin(), vocab.end()), options_(std::move(options)), cache_owner_(next_cache_owner++) {
  if (vocab_.empty()) throw Error(Errc::format, label + ": the BPE vocabulary is empty");
  for (const auto& [token, id] : vocab_) {
    if (id < 0) throw Error(Errc::format, label + ": token \"" + token + "\" has a negative id");
    vocab_size_ = std::max<int64_t>(vocab_size_, int64_t{id} + 1);
  }
  if (vocab_size_ > (int64_t{1} << 28))
    throw Error(Errc::format, label + ": BPE ids go up to " + std::to_string(vocab_size_) + ", expected < 2^28");
  tokens_.resize(static_cast<size_t>(vocab_size_));
  for (const auto& [token, id] : vocab_) tokens_[static_cast<size_t>(id)] = token;
  merges_.reserve(merges.size());
  const size_t prefix = options_.continuing_subword_prefix.size();
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const auto& [a, b] = merges[rank];
    auto ia = vocab_.find(a), ib = vocab_.find(b);
    if (ia == vocab_.end() || ib == vocab_.end()) {
      throw Error(Errc::format, label + ": merge " + std::to_string(rank) + " \"" + a + " " + b +
                                    "\" names a token that is not in the vocabulary");
    }
    // The merged token drops the second part's continuation prefix.
    const std::string merged = a + (b.compare(0, prefix, options_.continuing_subword_prefix) == 0 && prefix > 0
                                        ? b.substr(prefix)
                                        : b);
    auto im = vocab_.find(merged);
    if (im == vocab_.end()) {
      throw Error(Errc::format, label + ": merge " + std::to_string(rank) + " \"" + a + " " + b + "\" gives \"" +
                                    merged + "\", which is not in the vocabulary");
    }
    // The first rank of a pair counts (tokenizers keeps the first, too).
    merges_.emplace(pair_key(ia->second, ib->second), Merge{static_cast<int32_t>(rank), im->second});
  }
  merge_count_ = merges.size();
  if (options_.unk_token) {
    auto it = vocab_.find(*options_.unk_token);
    if (it == vocab_.end()) {
      throw Error(Errc::format, label + ": field \"model.unk_token\": \"" + *options_.unk_token +
                                    "\" is not in the vocabulary");
    }
    unk_id_ = it->second;
  }
}

std::string BpeModel::describe() const {
  return "BPE (" + std::to_string(vocab_.size()) + " tokens, " + std::to_string(merge_count_) + " merges)";
}

std::string BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= vocab_size_) return options_.unk_token.value_or("");
  return tokens_[static_cast<size_t>(id)];
}

int32_t BpeModel::token_to_id(std::string_view token) const {
  auto it = vocab_.find(token);
  return it == vocab_.end() ? -1 : it->second;
}

void BpeModel::encode_word(std::string_view word, std::vector<int32_t>& out, EncodeStats& stats) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = token_to_id(word); id >= 0) {
      out.push_back(id);
      return;
    }
  }
  if (word.size() > kCachedWordBytes) {
    merge_word(word, out, nullptr, stats);
    return;
  }
  WordCache& cache = thread_cache(cache_owner_);
  if (auto it = cache.words.find(word); it != cache.words.end()) {
    ++stats.lookups;
    out.insert(out.end(), it->second.begin(), it->second.end());
    return;
  }
  const size_t mark = out.size();
  merge_word(word, out, nullptr, stats);
  if (cache.words.size() < kCacheEntries)
    cache.words.emplace(std::string(word),
                        std::vector<int32_t>(out.begin() + static_cast<std::ptrdiff_t>(mark), out.end()));
}

void BpeModel::encode_word_with_offsets(std::string_view word, std::vector<int32_t>& out,
                                        std::vector<TokenOffset>& offsets, EncodeStats& stats) const {
  if (word.empty()) return;
  if (options_.ignore_merges) {
    if (const int32_t id = token_to_id(word); id >= 0) {
      out.push_back(id);
      offsets.push_back({0, static_cast<uint32_t>(word.size())});
      return;
    }
  }
  merge_word(word, out, &offsets, stats);
}

void BpeModel::merge_word(std::string_view word, std::vector<int32_t>& out, std::vector<TokenOffset>* offsets,
                          EncodeStats& stats) const {
  // Symbols as a doubly linked list over the word's characters.
  struct Symbol {
    int32_t id;
    int32_t prev, next;  // -1 at the ends
    size_t len;          // bytes covered; 0 once merged into the left neighbour
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  const size_t n = word.size();
  for (size_t i = 0; i < n;) {
    const size_t len = std::min(char_length(static_cast<unsigned char>(word[i])), n - i);
    std::string_view piece = word.substr(i, len);
    std::string decorated;  // with the continuation prefix / end-of-word suffix, when the model has them
    if ((i > 0 && !options_.continuing_subword_prefix.empty()) || (i + len == n && !options_.end_of_word_suffix.empty())) {
      decorated = (i > 0 ? options_.continuing_subword_prefix : std::string()) + std::string(piece) +
                  (i + len == n ? options_.end_of_word_suffix : std::string());
      piece = decorated;
    }
    ++stats.lookups;
    int32_t id = token_to_id(piece);
    if (id < 0 && options_.byte_fallback) {
      bool all = true;
      std::vector<int32_t> bytes;
      for (size_t k = i; k < i + len; ++k) {
        char name[8];
        std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(word[k]));
        const int32_t b = token_to_id(name);
        if (b < 0) {
          all = false;
          break;
        }
        bytes.push_back(b);
      }
      if (all) {
        for (int32_t b : bytes) sym.push_back({b, -1, -1, 1});
        i += len;
        continue;
      }
    }
    if (id < 0) {
      if (unk_id_ < 0) {  // no unknown token: the character is dropped, as tokenizers does
        i += len;
        continue;
      }
      if (options_.fuse_unk && !sym.empty() && sym.back().id == unk_id_) {
        sym.back().len += len;
        i += len;
        continue;
      }
      id = unk_id_;
    }
    sym.push_back({id, -1, -1, len});
    i += len;
  }
  for (size_t k = 0; k < sym.size(); ++k) {
    sym[k].prev = static_cast<int32_t>(k) - 1;
    sym[k].next = k + 1 < sym.size() ? static_cast<int32_t>(k) + 1 : -1;
  }
  // Candidate merges by (rank, position): the lowest rank first, the leftmost on a tie.
  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t left_id, right_id, result;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> heap;
  auto push = [&](int32_t pos) {
    if (pos < 0) return;
    const int32_t next = sym[static_cast<size_t>(pos)].next;
    if (next < 0) return;
    ++stats.lookups;
    auto it = merges_.find(pair_key(sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(next)].id));
    if (it == merges_.end()) return;
    heap.push({it->second.rank, pos, sym[static_cast<size_t>(pos)].id, sym[static_cast<size_t>(next)].id,
               it->second.result});
  };
  for (size_t k = 0; k + 1 < sym.size(); ++k) push(static_cast<int32_t>(k));
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[static_cast<size_t>(c.pos)];
    // Stale: the left symbol was merged away or changed, or its neighbour did.
    if (left.len == 0 || left.id != c.left_id || left.next < 0) continue;
    Symbol& right = sym[static_cast<size_t>(left.next)];
    if (right.id != c.right_id) continue;
    left.id = c.result;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) sym[static_cast<size_t>(right.next)].prev = c.pos;
    push(left.prev);
    push(c.pos);
  }
  uint32_t at = 0;
  for (const Symbol& s : sym) {
    if (s.len == 0) continue;
    out.push_back(s.id);
    if (offsets) offsets->push_back({at, at + static_cast<uint32_t>(s.len)});
    at += static_cast<uint32_t>(s.len);
  }
}

}  // namespace stoke

