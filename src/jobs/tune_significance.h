// When is a tune trial really faster? Runs of the same setting on a shared
// machine differ by 10-30% from one to the next, so one run of a candidate
// against one of the baseline picks noise (a 2.98x "win" from --workers 2 on a
// compute-bound run; a different winner every time). The rule here: the
// candidate and the baseline run alternately, at least `min_runs` times each,
// and a difference counts only when it lies outside the run-to-run spread —
// every candidate run beats every baseline run (or loses to it) — and is at
// least `min_gain` in the medians. Else more runs, up to `max_runs`, then "no
// significant difference": the baseline stays.
//
// A pure function of the measured rates, so the rule is tested on numbers.
#pragma once

#include <vector>

namespace stoke {

enum class Significance {
  need_more_runs,  // not yet decided: run the pair again
  faster,          // the candidate is faster beyond the spread
  slower,          // the candidate is slower beyond the spread
  no_difference,   // within the spread (or below min_gain) after enough runs
};

struct RateComparison {
  Significance verdict = Significance::need_more_runs;
  double ratio = 1;   // median(candidate) / median(baseline)
  double spread = 0;  // the larger run-to-run spread, (max - min) / median, of the two
};

struct SignificanceRule {
  int min_runs = 3;
  int max_runs = 5;
  double min_gain = 1.05;  // a change smaller than this is not worth a setting
};

// candidate[i] and baseline[i]: rates (higher is better) of alternate runs.
RateComparison compare_rates(const std::vector<double>& candidate, const std::vector<double>& baseline,
                             const SignificanceRule& rule = {});

}  // namespace stoke
