// tune's rule for "faster" on numbers: a change counts only when every run of
// it beats every run of the baseline (outside the run-to-run spread) by at
// least 5% in the medians, after at least 3 runs each; noisy or close runs
// need more runs, then end as "no significant difference".
#include <gtest/gtest.h>

#include "jobs/tune_significance.h"

namespace stoke {
namespace {

TEST(TuneSignificance, FewerThanThreeRunsNeverDecide) {
  // Even a 3x single-run "win" (the 2.98x from --workers 2) is not taken on one run.
  EXPECT_EQ(compare_rates({300}, {100}).verdict, Significance::need_more_runs);
  EXPECT_EQ(compare_rates({300, 310}, {100, 105}).verdict, Significance::need_more_runs);
  EXPECT_EQ(compare_rates({}, {}).verdict, Significance::need_more_runs);
}

TEST(TuneSignificance, ClearlySeparatedRunsDecide) {
  const RateComparison f = compare_rates({130, 128, 133}, {100, 103, 99});
  EXPECT_EQ(f.verdict, Significance::faster);
  EXPECT_NEAR(f.ratio, 130.0 / 100.0, 1e-12);
  EXPECT_NEAR(f.spread, (103.0 - 99.0) / 100.0, 1e-12);  // the baseline's is the larger
  EXPECT_EQ(compare_rates({70, 72, 69}, {100, 103, 99}).verdict, Significance::slower);
}

TEST(TuneSignificance, OverlappingNoisyRunsAreNotAWin) {
  // A noisy machine: one lucky candidate run would have "won" 2.98x; medians differ, ranges overlap.
  std::vector<double> cand = {298, 110, 95}, base = {100, 120, 90};
  RateComparison c = compare_rates(cand, base);
  EXPECT_EQ(c.verdict, Significance::need_more_runs);
  cand.push_back(105), base.push_back(101);
  EXPECT_EQ(compare_rates(cand, base).verdict, Significance::need_more_runs);
  cand.push_back(99), base.push_back(104);
  c = compare_rates(cand, base);
  EXPECT_EQ(c.verdict, Significance::no_difference);  // 5 runs each: the baseline stays
}

TEST(TuneSignificance, SeparatedButSmallerThanTheMinimumGainIsNoDifference) {
  // Consistently 2% faster: real, but not worth a setting — and never reported as a 1.0x "win".
  EXPECT_EQ(compare_rates({102, 102.1, 102.2}, {100, 100.1, 100.05}).verdict, Significance::no_difference);
  SignificanceRule strict;
  strict.min_gain = 1.01;
  EXPECT_EQ(compare_rates({102, 102.1, 102.2}, {100, 100.1, 100.05}, strict).verdict, Significance::faster);
}

}  // namespace
}  // namespace stoke
