// The graph buckets of training micro-batches: the padded shape a micro-batch
// of T tokens, B sequences and longest sequence L runs at when its encoder
// forward and backward replay CUDA graphs (EncoderTrainingRunner). A graph
// replays fixed shapes, so every micro-batch of a bucket is padded to the
// bucket's; the plan keeps the number of buckets small on a real length mix
// and the padding a bounded fraction of the work:
// - tokens: rounded up to a multiple of max(64, 2^floor(log2 T) / 8), so at
//   most 8 buckets per doubling of T and at most 1/8 (12.5%) extra tokens
//   above 512 (under 64 below); never past the workspace (max_tokens);
// - the longest sequence: the next power of two (at least 16, at most the
//   model's positions): attention's shared memory and the padding chunks;
// - sequences: the workspace's sequence slots, plus enough slots for the
//   padding tokens cut into sequences of at most the bucket's longest (each
//   padding token attends within its chunk only, so padding costs what a
//   real token of that length costs, not the square of the padding).
// Micro-batches above kGraphMaxTokens run eagerly: launch overhead is small
// beside their compute, and padding would cost more than it saves.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace stoke {

struct TrainBucket {
  int64_t tokens = 0;     // padded token rows
  int64_t sequences = 0;  // sequence slots: the workspace's, plus the padding chunks'
  int max_seqlen = 0;     // attention's bound for every sequence of the bucket
  bool operator==(const TrainBucket&) const = default;
  auto operator<=>(const TrainBucket&) const = default;
};

class TrainBucketPlan {
 public:
  static constexpr int64_t kGraphMaxTokens = 16384;
  static constexpr int64_t kMinTokenStep = 64;
  static constexpr int kMinSeqlen = 16;

  // max_tokens / max_sequences: the runner's workspace; max_positions: the
  // model's usable positions (no sequence is longer).
  TrainBucketPlan(int64_t max_tokens, int64_t max_sequences, int64_t max_positions);

  // The bucket of a micro-batch, or nothing when it runs eagerly (too many
  // tokens for a graph, or a shape the workspace cannot pad).
  std::optional<TrainBucket> bucket_of(int64_t tokens, int64_t sequences, int64_t max_seqlen) const;
  // The most sequence slots any bucket has (the size of the device offsets).
  int64_t max_sequence_slots() const;

  // The padding of a micro-batch in its bucket: cu_seqlens of B + 1 offsets
  // (the batch's own) extended to the bucket's sequences + 1: the padding
  // tokens [T, bucket.tokens) cut into sequences of at most max_seqlen, then
  // empty sequences. Appends to `cu` (which holds the batch's B + 1 offsets).
  static void pad_offsets(const TrainBucket& bucket, int64_t real_sequences, std::vector<int32_t>& cu);

  // How a length mix buckets: the distinct buckets (the graphs captured) and
  // the padding's share of the tokens enqueued.
  struct MixReport {
    std::vector<TrainBucket> buckets;  // sorted
    int64_t real_tokens = 0, padded_tokens = 0, eager_batches = 0;
    double waste() const {
      return padded_tokens > 0 ? static_cast<double>(padded_tokens - real_tokens) / static_cast<double>(padded_tokens)
                               : 0.0;
    }
  };
  // batches: each micro-batch's sequence lengths.
  MixReport plan_mix(std::span<const std::vector<int64_t>> batches) const;

 private:
  int64_t max_tokens_, max_sequences_, max_positions_;
};

}  // namespace stoke
