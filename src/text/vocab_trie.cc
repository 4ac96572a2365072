#include "text/vocab_trie.h"

#include <algorithm>

namespace stoke {

int32_t VocabTrie::find_edge(uint64_t key) const {
  const size_t mask = edges_.size() - 1;
  for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
    const Edge& e = edges_[i];
    if (e.key == key) return e.child;
    if (e.child == kNone) return kNone;
  }
}

void VocabTrie::add_edge(uint64_t key, int32_t child) {
  if ((edge_count_ + 1) * 2 > edges_.size()) grow();
  const size_t mask = edges_.size() - 1;
  size_t i = hash(key) & mask;
  while (edges_[i].child != kNone) i = (i + 1) & mask;
  edges_[i] = Edge{key, child};
  ++edge_count_;
}

void VocabTrie::grow() {
  std::vector<Edge> old = std::move(edges_);
  edges_.assign(old.size() * 2, Edge{});
  edge_count_ = 0;
  for (const Edge& e : old)
    if (e.child != kNone) add_edge(e.key, e.child);
}

int32_t VocabTrie::child(int32_t node, uint8_t byte) const {
  if (node == 0) return root_init_ ? root_edges_[byte] : kNone;
  return find_edge(edge_key(node, byte));
}

int32_t VocabTrie::walk(std::string_view s) const {
  int32_t node = root();
  for (char ch : s) {
    node = child(node, static_cast<uint8_t>(ch));
    if (node == kNone) return kNone;
  }
  return node;
}

void VocabTrie::insert(std::string_view token, int32_t id) {
  if (!root_init_) {
    std::fill(std::begin(root_edges_), std::end(root_edges_), kNone);
    root_init_ = true;
  }
  int32_t node = root();
  for (char ch : token) {
    const uint8_t b = static_cast<uint8_t>(ch);
    int32_t next = child(node, b);
    if (next == kNone) {
      next = static_cast<int32_t>(nodes_.size());
      nodes_.push_back(Node{});
      if (node == 0)
        root_edges_[b] = next;
      else
        add_edge(edge_key(node, b), next);
    }
    node = next;
  }
  nodes_[static_cast<size_t>(node)].id = id;
}

}  // namespace stoke
