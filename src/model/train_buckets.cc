#include "model/train_buckets.h"

#include <algorithm>
#include <set>

#include "core/error.h"

namespace stoke {

namespace {

// The token rounding for a micro-batch of T tokens: 1/8 of its power of two.
int64_t token_step(int64_t T) {
  int64_t pow2 = 1;
  while (pow2 * 2 <= T) pow2 *= 2;
  return std::max(TrainBucketPlan::kMinTokenStep, pow2 / 8);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

TrainBucketPlan::TrainBucketPlan(int64_t max_tokens, int64_t max_sequences, int64_t max_positions)
    : max_tokens_(max_tokens), max_sequences_(max_sequences), max_positions_(max_positions) {
  if (max_tokens <= 0 || max_sequences <= 0 || max_positions <= 0)
    throw Error(Errc::invalid_argument, "graph bucket plan: the workspace and the positions must be positive");
}

std::optional<TrainBucket> TrainBucketPlan::bucket_of(int64_t tokens, int64_t sequences, int64_t max_seqlen) const {
  if (tokens <= 0 || sequences <= 0 || tokens > kGraphMaxTokens || tokens > max_tokens_ ||
      sequences > max_sequences_ || max_seqlen > max_positions_)
    return std::nullopt;
  TrainBucket b;
  b.tokens = std::min(ceil_div(tokens, token_step(tokens)) * token_step(tokens), max_tokens_);
  int64_t len = kMinSeqlen;
  while (len < max_seqlen) len *= 2;
  b.max_seqlen = static_cast<int>(std::min(len, max_positions_));
  // Padding is under one token step of the bucket (the step only grows with
  // T); its chunks are at most max_seqlen long.
  b.sequences = max_sequences_ + ceil_div(token_step(b.tokens) - 1, b.max_seqlen);
  return b;
}

int64_t TrainBucketPlan::max_sequence_slots() const {
  const int64_t top = std::min(max_tokens_, kGraphMaxTokens);
  return max_sequences_ + ceil_div(token_step(top) - 1, std::min<int64_t>(kMinSeqlen, max_positions_));
}

void TrainBucketPlan::pad_offsets(const TrainBucket& bucket, int64_t real_sequences, std::vector<int32_t>& cu) {
  if (static_cast<int64_t>(cu.size()) != real_sequences + 1)
    throw Error(Errc::internal, "pad_offsets: expected the batch's own offsets first");
  while (cu.back() < bucket.tokens)
    cu.push_back(static_cast<int32_t>(std::min<int64_t>(cu.back() + bucket.max_seqlen, bucket.tokens)));
  if (static_cast<int64_t>(cu.size()) > bucket.sequences + 1)
    throw Error(Errc::internal, "pad_offsets: the padding needs more sequence slots than the bucket has");
  while (static_cast<int64_t>(cu.size()) < bucket.sequences + 1) cu.push_back(static_cast<int32_t>(bucket.tokens));
}

TrainBucketPlan::MixReport TrainBucketPlan::plan_mix(std::span<const std::vector<int64_t>> batches) const {
  MixReport r;
  std::set<TrainBucket> seen;
  for (const std::vector<int64_t>& lens : batches) {
    int64_t T = 0, L = 0;
    for (int64_t n : lens) {
      T += n;
      L = std::max(L, n);
    }
    r.real_tokens += T;
    const std::optional<TrainBucket> b = bucket_of(T, static_cast<int64_t>(lens.size()), L);
    if (!b) {
      ++r.eager_batches;
      r.padded_tokens += T;
      continue;
    }
    seen.insert(*b);
    r.padded_tokens += b->tokens;
  }
  r.buckets.assign(seen.begin(), seen.end());
  return r;
}

}  // namespace stoke
