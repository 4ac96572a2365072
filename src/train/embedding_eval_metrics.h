// Evaluation metrics of embedding models, computed on the host from
// embeddings the caller has already made: information retrieval (queries
// against a corpus) and scored pairs, each defined as sentence-transformers
// 6.2 defines it (InformationRetrievalEvaluator, EmbeddingSimilarityEvaluator)
// and named as it names them, so a stoke run's numbers read like an ST run's.
//
//   queries [Q, D] f32 ─┐                                   ┌ cosine_accuracy@k, cosine_precision@k,
//                        ├ cosine (double) ─ top-k per query ┤ cosine_recall@k, cosine_ndcg@10,
//   corpus  [C, D] f32 ─┘   (blocked, threaded)              └ cosine_mrr@10, cosine_map@100
//   (a[i], b[i], gold[i]) ── cosine (double) ── pearson_cosine, spearman_cosine
//
// Pure host code: no device, no model, no files (train/embedding_eval_data.h
// reads the sets; the trainer embeds their texts).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace stoke {
class ThreadPool;
}

namespace stoke::train {

// A row-major f32 matrix the caller owns: rows x dim values at data.
struct EmbeddingRows {
  const float* data = nullptr;
  size_t rows = 0;
  size_t dim = 0;
};

// Metrics in the order they were computed, by sentence-transformers' names.
struct NamedMetrics {
  std::vector<std::pair<std::string, double>> values;
  // Retrieval: queries averaged over, and queries left out because they have
  // no relevant document (ST drops those when it builds its evaluator).
  uint64_t queries = 0, queries_without_relevant = 0;

  const double* find(std::string_view name) const;  // nullptr when absent
  // Throws Error(not_found) naming the metric and listing the ones there are.
  double at(std::string_view name) const;
};

// Whether a larger value of the metric is better, for choosing the best
// checkpoint: true for every name this file produces (cosine_<metric>@k,
// pearson_cosine, spearman_cosine); nullopt for a name it does not know.
std::optional<bool> metric_higher_is_better(std::string_view name);

// The cut-offs, as InformationRetrievalEvaluator's defaults.
struct RetrievalMetricOptions {
  std::vector<int> accuracy_at_k{1, 3, 5, 10};
  std::vector<int> precision_recall_at_k{1, 3, 5, 10};
  std::vector<int> mrr_at_k{10};
  std::vector<int> ndcg_at_k{10};
  std::vector<int> map_at_k{100};
};

struct RankedHit {
  double score = 0;    // cosine similarity
  uint32_t index = 0;  // corpus row
};

// The best min(k, C) corpus rows of every query by cosine similarity, best
// first. Both sides are normalized here (x / max(|x|, 1e-12), as torch's
// F.normalize in ST's cos_sim): callers pass raw embeddings. Scores are
// computed in double, summed in the same order for every (query, row) pair
// whatever the blocking or thread count, so results do not depend on either.
//
// Ties: ST 6.2 ranks by (-score, corpus id) — it re-selects rows tied at the
// k-th score, so torch.topk's arbitrary choice never shows. Here a tie goes
// to the row with the smaller tie_rank[row] (the row's position in ascending
// id order: train/embedding_eval_data.h fills it), or the smaller row index
// when tie_rank is empty. ST's scores are f32 and ours double, so two rows
// whose cosines differ by less than f32 resolution may tie in ST and not
// here; that is the one place the orders can differ.
//
// Throws Error(invalid_argument): dims differ, an empty side, k < 1, a
// non-finite value (naming the side and row), tie_rank of the wrong size.
// pool: nullptr runs on the calling thread.
std::vector<std::vector<RankedHit>> rank_top_k(const EmbeddingRows& queries, const EmbeddingRows& corpus, size_t k,
                                               std::span<const uint32_t> tie_rank = {}, ThreadPool* pool = nullptr);

// InformationRetrievalEvaluator's metrics with the "cosine" score function,
// named "cosine_accuracy@1", ..., "cosine_precision@k", "cosine_recall@k",
// "cosine_ndcg@k", "cosine_mrr@k", "cosine_map@k" in ST's order. relevant[q]
// lists the corpus rows relevant to query q (duplicates count once). As in
// ST: relevance is binary; precision@k divides by k even when the corpus is
// smaller; recall@k by the number of relevant rows; ndcg's ideal ranking
// puts every relevant row first; map@k divides by min(k, relevant); a query
// with no relevant row is left out of every average (counted in
// queries_without_relevant). Throws Error(invalid_argument): relevant not
// one list per query, a row out of range, no query with a relevant row, and
// rank_top_k's refusals.
NamedMetrics retrieval_metrics(const EmbeddingRows& queries, const EmbeddingRows& corpus,
                               const std::vector<std::vector<uint32_t>>& relevant,
                               std::span<const uint32_t> tie_rank = {}, const RetrievalMetricOptions& options = {},
                               ThreadPool* pool = nullptr);

// The metrics from rankings already made (rank_top_k's, or any, best first;
// each list at least as long as the largest k or the whole corpus).
NamedMetrics retrieval_metrics_from_ranking(const std::vector<std::vector<RankedHit>>& ranked,
                                            const std::vector<std::vector<uint32_t>>& relevant, size_t corpus_rows,
                                            const RetrievalMetricOptions& options = {});

// EmbeddingSimilarityEvaluator with the "cosine" similarity:
// "pearson_cosine" and "spearman_cosine" between cos(a[i], b[i]) (double)
// and gold[i]. Spearman is Pearson of the average ranks (ties share the mean
// of their ranks, as scipy's spearmanr). A constant side gives NaN, as scipy
// does (JSON writers show it as null). Throws Error(invalid_argument): fewer
// than 2 pairs, sizes or dims that differ, non-finite values.
NamedMetrics scored_pair_metrics(const EmbeddingRows& a, const EmbeddingRows& b, std::span<const double> gold);

// Exposed for tests: Pearson's r (scipy's pearsonr, centred and normalized
// before the dot product, clipped to [-1, 1]), and average ranks (1-based).
double pearson_correlation(std::span<const double> x, std::span<const double> y);
std::vector<double> average_ranks(std::span<const double> x);

}  // namespace stoke::train
