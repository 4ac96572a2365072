// A byte trie over a WordPiece vocabulary, for greedy longest-match lookups
// that cost one step per byte matched (instead of one hash of every candidate
// substring, which is what makes naive WordPiece quadratic in the word length).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace stoke {

class VocabTrie {
 public:
  static constexpr int32_t kNone = -1;

  // Inserts token -> id (a later insert of the same token wins, as a Python dict does).
  void insert(std::string_view token, int32_t id);
  // Node reached from `node` by one byte, or kNone.
  int32_t child(int32_t node, uint8_t byte) const;
  // Node reached by a whole string from the root, or kNone.
  int32_t walk(std::string_view s) const;
  // Token id stored at a node, or kNone.
  int32_t id_at(int32_t node) const { return nodes_[static_cast<size_t>(node)].id; }
  static constexpr int32_t root() { return 0; }
  size_t node_count() const { return nodes_.size(); }

 private:
  struct Node {
    int32_t id = kNone;
  };
  // Edges in an open-addressing table keyed by (node << 8 | byte); the root's
  // 256 edges are a direct array since every word starts there.
  struct Edge {
    uint64_t key = ~uint64_t{0};
    int32_t child = kNone;
  };
  static uint64_t edge_key(int32_t node, uint8_t byte) {
    return (static_cast<uint64_t>(node) << 8) | byte;
  }
  static size_t hash(uint64_t key) { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 20); }
  void grow();
  int32_t find_edge(uint64_t key) const;
  void add_edge(uint64_t key, int32_t child);

  std::vector<Node> nodes_{Node{}};
  int32_t root_edges_[256] = {};
  bool root_init_ = false;
  std::vector<Edge> edges_ = std::vector<Edge>(1024);
  size_t edge_count_ = 0;
};

}  // namespace stoke
