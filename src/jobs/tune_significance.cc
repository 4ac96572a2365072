#include "jobs/tune_significance.h"

#include <algorithm>

namespace stoke {

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double spread(const std::vector<double>& v, double mid) {
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return mid > 0 ? (*hi - *lo) / mid : 0;
}

}  // namespace

RateComparison compare_rates(const std::vector<double>& candidate, const std::vector<double>& baseline,
                             const SignificanceRule& rule) {
  RateComparison c;
  const size_t runs = std::min(candidate.size(), baseline.size());
  if (runs == 0) return c;
  const double mc = median(candidate), mb = median(baseline);
  c.ratio = mb > 0 ? mc / mb : 1;
  c.spread = std::max(spread(candidate, mc), spread(baseline, mb));
  if (static_cast<int>(runs) < rule.min_runs) return c;
  const auto [c_lo, c_hi] = std::minmax_element(candidate.begin(), candidate.end());
  const auto [b_lo, b_hi] = std::minmax_element(baseline.begin(), baseline.end());
  // Outside the spread: the two sets of runs do not overlap. With 3 runs
  // each, unrelated noise orders them so with probability 1/20 per side.
  if (*c_lo > *b_hi && c.ratio >= rule.min_gain) {
    c.verdict = Significance::faster;
  } else if (*c_hi < *b_lo && c.ratio <= 1 / rule.min_gain) {
    c.verdict = Significance::slower;
  } else if (static_cast<int>(runs) >= rule.max_runs) {
    c.verdict = Significance::no_difference;
  } else if (c.ratio < rule.min_gain && c.ratio > 1 / rule.min_gain &&
             c.spread < rule.min_gain - 1) {
    // Tight runs, close medians: more runs cannot make it worth a setting.
    c.verdict = Significance::no_difference;
  }
  return c;
}

}  // namespace stoke
