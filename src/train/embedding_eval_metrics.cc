#include "train/embedding_eval_metrics.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>

#include "core/error.h"
#include "core/thread_pool.h"

// The dot-product kernel is built for AVX-512, AVX2 and baseline x86-64 and
// picked at load time (the same rule as src/cpu/fast/fast_common.h, which
// this layer may not include); sanitizer builds define it empty.
#ifndef STOKE_CPU_CLONES
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define STOKE_CPU_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define STOKE_CPU_CLONES
#endif
#endif

namespace stoke::train {

const double* NamedMetrics::find(std::string_view name) const {
  for (const auto& [n, v] : values)
    if (n == name) return &v;
  return nullptr;
}

double NamedMetrics::at(std::string_view name) const {
  if (const double* v = find(name)) return *v;
  std::string have;
  for (const auto& [n, v] : values) have += (have.empty() ? "" : ", ") + n;
  throw Error(Errc::not_found, "no evaluation metric \"" + std::string(name) + "\" (the evaluation gives: " +
                                   (have.empty() ? std::string("none") : have) + ")");
}

std::optional<bool> metric_higher_is_better(std::string_view name) {
  if (name == "pearson_cosine" || name == "spearman_cosine") return true;
  for (std::string_view m : {"accuracy", "precision", "recall", "mrr", "ndcg", "map"}) {
    const std::string prefix = "cosine_" + std::string(m) + "@";
    if (name.size() <= prefix.size() || name.substr(0, prefix.size()) != prefix) continue;
    const std::string_view k = name.substr(prefix.size());
    if (k.front() != '0' && std::all_of(k.begin(), k.end(), [](char c) { return c >= '0' && c <= '9'; }))
      return true;
  }
  return std::nullopt;
}

namespace {

// Rows are scored in tiles of kTile queries x kTile corpus rows, each dot
// product accumulated in kLanes partial sums over d (lane l takes d = l mod
// kLanes) and the lanes added in a fixed order at the end. Every pair is
// summed the same way wherever it sits in a tile, so the scores do not depend
// on block sizes or threads. Rows are widened to double and padded with zero
// columns to a multiple of kLanes (a zero adds nothing: the sum is exact).
constexpr size_t kTile = 4;
constexpr size_t kLanes = 8;
// Corpus rows per block: their double copy stays in a core's L2 while every
// query tile streams over it.
constexpr size_t kBlockBytes = size_t{512} << 10;

size_t padded_dim(size_t dim) { return (dim + kLanes - 1) / kLanes * kLanes; }

// out[i * pd + d] = rows[first + i][d] as double, zero past dim and past the
// last row (count rows, padded up to a whole tile).
void widen_rows(const EmbeddingRows& m, size_t first, size_t count, size_t padded_rows, double* out) {
  const size_t pd = padded_dim(m.dim);
  std::fill(out, out + padded_rows * pd, 0.0);
  for (size_t i = 0; i < count; ++i) {
    const float* src = m.data + (first + i) * m.dim;
    double* dst = out + i * pd;
    for (size_t d = 0; d < m.dim; ++d) dst[d] = src[d];
  }
}

// dots[i * kTile + j] = q row i . c row j for a kTile x kTile tile; pd is a
// multiple of kLanes. std::fma keeps one rounding per step on every clone.
STOKE_CPU_CLONES
void dot_tile(const double* q, const double* c, size_t pd, double* dots) {
  double acc[kTile][kTile][kLanes] = {};
  for (size_t d = 0; d < pd; d += kLanes)
    for (size_t i = 0; i < kTile; ++i)
      for (size_t j = 0; j < kTile; ++j)
        for (size_t l = 0; l < kLanes; ++l)
          acc[i][j][l] = std::fma(q[i * pd + d + l], c[j * pd + d + l], acc[i][j][l]);
  for (size_t i = 0; i < kTile; ++i)
    for (size_t j = 0; j < kTile; ++j) {
      double s = 0;
      for (size_t l = 0; l < kLanes; ++l) s += acc[i][j][l];
      dots[i * kTile + j] = s;
    }
}

// 1 / max(|row|, 1e-12) for every row (F.normalize's eps), norms in double;
// refuses a non-finite value, naming the side and row.
std::vector<double> inverse_norms(const EmbeddingRows& m, const char* side) {
  std::vector<double> inv(m.rows);
  for (size_t r = 0; r < m.rows; ++r) {
    const float* row = m.data + r * m.dim;
    double ss = 0;
    for (size_t d = 0; d < m.dim; ++d) {
      if (!std::isfinite(row[d]))
        throw Error(Errc::invalid_argument, std::string(side) + " embedding " + std::to_string(r) + ", value " +
                                                std::to_string(d) + ": not a finite number");
      ss += static_cast<double>(row[d]) * row[d];
    }
    inv[r] = 1.0 / std::max(std::sqrt(ss), 1e-12);
  }
  return inv;
}

void check_rows(const EmbeddingRows& m, const char* side) {
  if (m.rows == 0) throw Error(Errc::invalid_argument, std::string("no ") + side + " embeddings");
  if (m.dim == 0 || m.data == nullptr)
    throw Error(Errc::invalid_argument, std::string(side) + " embeddings: expected rows of at least one value");
}

struct Candidate {
  double score;
  uint32_t rank;  // tie_rank of the row: smaller wins a tie
  uint32_t index;
};

// a ranks before b: the higher score, then the smaller tie rank.
bool before(const Candidate& a, const Candidate& b) {
  return a.score > b.score || (a.score == b.score && a.rank < b.rank);
}

// The best k candidates seen: a heap whose front is the worst kept, so a new
// candidate costs one comparison unless it gets in.
struct TopK {
  std::vector<Candidate> heap;
  void offer(const Candidate& c, size_t k) {
    if (heap.size() < k) {
      heap.push_back(c);
      std::push_heap(heap.begin(), heap.end(), before);
    } else if (before(c, heap.front())) {
      std::pop_heap(heap.begin(), heap.end(), before);
      heap.back() = c;
      std::push_heap(heap.begin(), heap.end(), before);
    }
  }
};

void for_range(ThreadPool* pool, size_t n, const std::function<void(size_t, size_t)>& fn) {
  if (pool)
    pool->parallel_for(n, fn);
  else
    fn(0, n);
}

}  // namespace

std::vector<std::vector<RankedHit>> rank_top_k(const EmbeddingRows& queries, const EmbeddingRows& corpus, size_t k,
                                               std::span<const uint32_t> tie_rank, ThreadPool* pool) {
  check_rows(queries, "query");
  check_rows(corpus, "corpus");
  if (queries.dim != corpus.dim)
    throw Error(Errc::invalid_argument, "query embeddings have " + std::to_string(queries.dim) +
                                            " dimensions, corpus embeddings " + std::to_string(corpus.dim) +
                                            " (expected the same model's vectors)");
  if (k < 1) throw Error(Errc::invalid_argument, "top-k: k must be at least 1");
  if (!tie_rank.empty() && tie_rank.size() != corpus.rows)
    throw Error(Errc::invalid_argument, "tie ranks: " + std::to_string(tie_rank.size()) + " for " +
                                            std::to_string(corpus.rows) + " corpus rows");
  if (corpus.rows > UINT32_MAX) throw Error(Errc::invalid_argument, "corpus: more than 2^32-1 rows");
  k = std::min(k, corpus.rows);
  const std::vector<double> inv_q = inverse_norms(queries, "query");
  const std::vector<double> inv_c = inverse_norms(corpus, "corpus");

  const size_t pd = padded_dim(queries.dim);
  const size_t q_tiles = (queries.rows + kTile - 1) / kTile;
  // Every query widened once: [q_tiles * kTile, pd] doubles, 2x the f32 input.
  std::vector<double> qd(q_tiles * kTile * pd);
  for_range(pool, q_tiles, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      const size_t first = t * kTile, count = std::min(kTile, queries.rows - first);
      widen_rows(queries, first, count, kTile, qd.data() + first * pd);
    }
  });

  const size_t block_rows = std::max(kTile, kBlockBytes / (pd * sizeof(double)) / kTile * kTile);
  std::vector<double> cd(block_rows * pd);  // [block_rows, pd]: the corpus block being scored
  std::vector<TopK> top(queries.rows);
  for (size_t c0 = 0; c0 < corpus.rows; c0 += block_rows) {
    const size_t n = std::min(block_rows, corpus.rows - c0);
    const size_t c_tiles = (n + kTile - 1) / kTile;
    for_range(pool, c_tiles, [&](size_t b, size_t e) {
      for (size_t t = b; t < e; ++t)
        widen_rows(corpus, c0 + t * kTile, std::min(kTile, n - t * kTile), kTile, cd.data() + t * kTile * pd);
    });
    // Threads own whole query tiles, so each heap has one writer.
    for_range(pool, q_tiles, [&](size_t b, size_t e) {
      double dots[kTile * kTile];
      for (size_t qt = b; qt < e; ++qt) {
        const size_t q0 = qt * kTile, qn = std::min(kTile, queries.rows - q0);
        for (size_t ct = 0; ct < c_tiles; ++ct) {
          dot_tile(qd.data() + q0 * pd, cd.data() + ct * kTile * pd, pd, dots);
          const size_t cn = std::min(kTile, n - ct * kTile);
          for (size_t i = 0; i < qn; ++i)
            for (size_t j = 0; j < cn; ++j) {
              const auto row = static_cast<uint32_t>(c0 + ct * kTile + j);
              const double score = dots[i * kTile + j] * inv_q[q0 + i] * inv_c[row];
              top[q0 + i].offer({score, tie_rank.empty() ? row : tie_rank[row], row}, k);
            }
        }
      }
    });
  }

  std::vector<std::vector<RankedHit>> ranked(queries.rows);
  for_range(pool, queries.rows, [&](size_t b, size_t e) {
    for (size_t q = b; q < e; ++q) {
      std::vector<Candidate>& h = top[q].heap;
      std::sort(h.begin(), h.end(), before);
      ranked[q].reserve(h.size());
      for (const Candidate& c : h) ranked[q].push_back({c.score, c.index});
      std::vector<Candidate>().swap(h);
    }
  });
  return ranked;
}

namespace {

int max_k(const RetrievalMetricOptions& o) {
  int m = 0;
  for (const std::vector<int>* ks :
       {&o.accuracy_at_k, &o.precision_recall_at_k, &o.mrr_at_k, &o.ndcg_at_k, &o.map_at_k})
    for (int k : *ks) {
      if (k < 1)
        throw Error(Errc::invalid_argument, "retrieval metrics: k = " + std::to_string(k) + " (expected >= 1)");
      m = std::max(m, k);
    }
  if (m == 0) throw Error(Errc::invalid_argument, "retrieval metrics: no cut-off k given");
  return m;
}

// Discounted gain of a hit at 0-based position i (ST's compute_dcg_at_k).
double gain(size_t i) { return 1.0 / std::log2(static_cast<double>(i) + 2.0); }

}  // namespace

NamedMetrics retrieval_metrics_from_ranking(const std::vector<std::vector<RankedHit>>& ranked,
                                            const std::vector<std::vector<uint32_t>>& relevant, size_t corpus_rows,
                                            const RetrievalMetricOptions& o) {
  const int top = max_k(o);
  if (relevant.size() != ranked.size())
    throw Error(Errc::invalid_argument, "retrieval metrics: " + std::to_string(relevant.size()) +
                                            " relevance lists for " + std::to_string(ranked.size()) + " queries");
  const size_t depth = std::min(static_cast<size_t>(top), corpus_rows);
  // Sums over the evaluated queries, in the order the keys are reported.
  std::vector<double> acc(o.accuracy_at_k.size()), prec(o.precision_recall_at_k.size()),
      rec(o.precision_recall_at_k.size()), ndcg(o.ndcg_at_k.size()), mrr(o.mrr_at_k.size()), map(o.map_at_k.size());
  NamedMetrics out;
  std::vector<uint32_t> rel;
  std::vector<char> hit;  // hit[i]: ranked[q][i] is relevant
  for (size_t q = 0; q < ranked.size(); ++q) {
    rel = relevant[q];
    std::sort(rel.begin(), rel.end());
    rel.erase(std::unique(rel.begin(), rel.end()), rel.end());
    for (uint32_t r : rel)
      if (r >= corpus_rows)
        throw Error(Errc::invalid_argument, "query " + std::to_string(q) + ": relevant row " + std::to_string(r) +
                                                " is past the corpus (" + std::to_string(corpus_rows) + " rows)");
    if (rel.empty()) {
      ++out.queries_without_relevant;
      continue;
    }
    if (ranked[q].size() < depth)
      throw Error(Errc::invalid_argument, "query " + std::to_string(q) + ": ranking of " +
                                              std::to_string(ranked[q].size()) + " rows, need " +
                                              std::to_string(depth));
    ++out.queries;
    hit.assign(depth, 0);
    for (size_t i = 0; i < depth; ++i) hit[i] = std::binary_search(rel.begin(), rel.end(), ranked[q][i].index);
    // correct[n] = relevant hits among the first n
    std::vector<size_t> correct(depth + 1, 0);
    for (size_t i = 0; i < depth; ++i) correct[i + 1] = correct[i] + static_cast<size_t>(hit[i]);
    auto within = [&](int k) { return correct[std::min(static_cast<size_t>(k), depth)]; };
    const double n_rel = static_cast<double>(rel.size());
    for (size_t i = 0; i < o.accuracy_at_k.size(); ++i) acc[i] += within(o.accuracy_at_k[i]) > 0 ? 1.0 : 0.0;
    for (size_t i = 0; i < o.precision_recall_at_k.size(); ++i) {
      const int k = o.precision_recall_at_k[i];
      prec[i] += static_cast<double>(within(k)) / k;  // over k, even past the corpus's end
      rec[i] += static_cast<double>(within(k)) / n_rel;
    }
    for (size_t i = 0; i < o.mrr_at_k.size(); ++i) {
      const size_t k = std::min(static_cast<size_t>(o.mrr_at_k[i]), depth);
      for (size_t r = 0; r < k; ++r)
        if (hit[r]) {
          mrr[i] += 1.0 / static_cast<double>(r + 1);
          break;
        }
    }
    for (size_t i = 0; i < o.ndcg_at_k.size(); ++i) {
      const size_t k = static_cast<size_t>(o.ndcg_at_k[i]);
      double dcg = 0, ideal = 0;
      for (size_t r = 0; r < std::min(k, depth); ++r)
        if (hit[r]) dcg += gain(r);
      for (size_t r = 0; r < std::min(k, rel.size()); ++r) ideal += gain(r);
      ndcg[i] += dcg / ideal;
    }
    for (size_t i = 0; i < o.map_at_k.size(); ++i) {
      const size_t k = static_cast<size_t>(o.map_at_k[i]);
      double sum = 0;
      for (size_t r = 0; r < std::min(k, depth); ++r)
        if (hit[r]) sum += static_cast<double>(correct[r + 1]) / static_cast<double>(r + 1);
      map[i] += sum / static_cast<double>(std::min(k, rel.size()));
    }
  }
  if (out.queries == 0)
    throw Error(Errc::invalid_argument, "retrieval metrics: no query has a relevant document (" +
                                            std::to_string(ranked.size()) + " queries)");
  const double n = static_cast<double>(out.queries);
  auto put = [&](const char* metric, const std::vector<int>& ks, const std::vector<double>& sums) {
    for (size_t i = 0; i < ks.size(); ++i)
      out.values.emplace_back("cosine_" + std::string(metric) + "@" + std::to_string(ks[i]), sums[i] / n);
  };
  // ST's order: accuracy, precision, recall, ndcg, mrr, map.
  put("accuracy", o.accuracy_at_k, acc);
  put("precision", o.precision_recall_at_k, prec);
  put("recall", o.precision_recall_at_k, rec);
  put("ndcg", o.ndcg_at_k, ndcg);
  put("mrr", o.mrr_at_k, mrr);
  put("map", o.map_at_k, map);
  return out;
}

NamedMetrics retrieval_metrics(const EmbeddingRows& queries, const EmbeddingRows& corpus,
                               const std::vector<std::vector<uint32_t>>& relevant, std::span<const uint32_t> tie_rank,
                               const RetrievalMetricOptions& options, ThreadPool* pool) {
  const int top = max_k(options);
  if (relevant.size() != queries.rows)
    throw Error(Errc::invalid_argument, "retrieval metrics: " + std::to_string(relevant.size()) +
                                            " relevance lists for " + std::to_string(queries.rows) + " queries");
  // Queries with nothing relevant are not ranked at all (ST never embeds them).
  std::vector<uint32_t> kept;
  for (size_t q = 0; q < relevant.size(); ++q)
    if (!relevant[q].empty()) kept.push_back(static_cast<uint32_t>(q));
  if (kept.empty())
    throw Error(Errc::invalid_argument, "retrieval metrics: no query has a relevant document (" +
                                            std::to_string(queries.rows) + " queries)");
  std::vector<float> packed;
  EmbeddingRows q = queries;
  std::vector<std::vector<uint32_t>> rel_kept;
  if (kept.size() != queries.rows) {
    check_rows(queries, "query");
    packed.resize(kept.size() * queries.dim);
    for (size_t i = 0; i < kept.size(); ++i)
      std::copy_n(queries.data + kept[i] * queries.dim, queries.dim, packed.data() + i * queries.dim);
    q = {packed.data(), kept.size(), queries.dim};
    for (uint32_t k : kept) rel_kept.push_back(relevant[k]);
  }
  const auto& rel = kept.size() != queries.rows ? rel_kept : relevant;
  const auto ranked = rank_top_k(q, corpus, static_cast<size_t>(top), tie_rank, pool);
  NamedMetrics out = retrieval_metrics_from_ranking(ranked, rel, corpus.rows, options);
  out.queries_without_relevant = queries.rows - kept.size();
  return out;
}

double pearson_correlation(std::span<const double> x, std::span<const double> y) {
  const size_t n = x.size();
  if (n != y.size() || n < 2) throw Error(Errc::invalid_argument, "pearson: expected two equal lists of >= 2 values");
  auto constant = [](std::span<const double> v) {
    return std::all_of(v.begin(), v.end(), [&](double a) { return a == v[0]; });
  };
  if (constant(x) || constant(y)) return std::nan("");  // scipy: ConstantInputWarning, r = nan
  auto centred_unit = [n](std::span<const double> v) {
    const double mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(n);
    std::vector<double> m(n);
    double big = 0;
    for (size_t i = 0; i < n; ++i) big = std::max(big, std::fabs(m[i] = v[i] - mean));
    // Scaled by the largest deviation first, as scipy does, so squares cannot overflow.
    double ss = 0;
    for (double a : m) ss += (a / big) * (a / big);
    const double norm = big * std::sqrt(ss);
    for (double& a : m) a /= norm;
    return m;
  };
  const std::vector<double> xm = centred_unit(x), ym = centred_unit(y);
  double r = 0;
  for (size_t i = 0; i < n; ++i) r += xm[i] * ym[i];
  r = std::clamp(r, -1.0, 1.0);
  return n == 2 ? std::round(r) : r;  // scipy returns exactly +-1 for two points
}

std::vector<double> average_ranks(std::span<const double> x) {
  std::vector<uint32_t> order(x.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return x[a] < x[b]; });
  std::vector<double> ranks(x.size());
  for (size_t i = 0; i < order.size();) {
    size_t j = i;
    while (j + 1 < order.size() && x[order[j + 1]] == x[order[i]]) ++j;
    const double mean = (static_cast<double>(i) + static_cast<double>(j)) / 2.0 + 1.0;  // ranks i+1 .. j+1
    for (size_t t = i; t <= j; ++t) ranks[order[t]] = mean;
    i = j + 1;
  }
  return ranks;
}

NamedMetrics scored_pair_metrics(const EmbeddingRows& a, const EmbeddingRows& b, std::span<const double> gold) {
  check_rows(a, "first sentence");
  check_rows(b, "second sentence");
  if (a.rows != b.rows || a.rows != gold.size())
    throw Error(Errc::invalid_argument, "scored pairs: " + std::to_string(a.rows) + " first and " +
                                            std::to_string(b.rows) + " second embeddings for " +
                                            std::to_string(gold.size()) + " scores (expected one of each per pair)");
  if (a.dim != b.dim)
    throw Error(Errc::invalid_argument, "scored pairs: embeddings of " + std::to_string(a.dim) + " and " +
                                            std::to_string(b.dim) + " dimensions");
  if (gold.size() < 2)
    throw Error(Errc::invalid_argument, "scored pairs: " + std::to_string(gold.size()) +
                                            " pair (correlations need at least 2)");
  for (size_t i = 0; i < gold.size(); ++i)
    if (!std::isfinite(gold[i]))
      throw Error(Errc::invalid_argument, "scored pairs: score " + std::to_string(i) + " is not a finite number");
  const std::vector<double> inv_a = inverse_norms(a, "first sentence"), inv_b = inverse_norms(b, "second sentence");
  std::vector<double> cosine(a.rows);
  for (size_t i = 0; i < a.rows; ++i) {
    const float* x = a.data + i * a.dim;
    const float* y = b.data + i * b.dim;
    double dot = 0;
    for (size_t d = 0; d < a.dim; ++d) dot += static_cast<double>(x[d]) * y[d];
    cosine[i] = dot * inv_a[i] * inv_b[i];
  }
  NamedMetrics out;
  out.values.emplace_back("pearson_cosine", pearson_correlation(gold, cosine));
  const std::vector<double> rg = average_ranks(gold), rc = average_ranks(cosine);
  out.values.emplace_back("spearman_cosine", pearson_correlation(rg, rc));
  return out;
}

}  // namespace stoke::train
