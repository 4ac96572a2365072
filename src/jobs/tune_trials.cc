#include "jobs/tune_trials.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "io/atomic_file.h"

namespace stoke::tuning {

namespace {

double median_of(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void check_stop(const std::atomic<bool>* cancel, const std::string& knob, const std::string& value) {
  if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) throw Interrupted{knob, value};
}

TuneTrial interrupted_row(const Interrupted& stop) {
  TuneTrial t;
  t.knob = stop.knob;
  t.value = stop.value;
  t.note = stop.knob == "start" ? "interrupted before it completed" : "interrupted before the race decided: not taken";
  return t;
}

TuneTrial race_row(TuneTrial shown, const std::vector<double>& cand, const std::vector<double>& cand_tokens,
                   const std::vector<double>& cand_busy, const RateComparison& cmp) {
  shown.texts_per_second = median_of(cand);
  shown.tokens_per_second = median_of(cand_tokens);
  shown.device_busy = median_of(cand_busy);
  char note[200];
  const int runs = static_cast<int>(cand.size());
  switch (cmp.verdict) {
    case Significance::faster:
      std::snprintf(note, sizeof note, "%.2fx the best so far (%d+%d runs, spread %.0f%%)", cmp.ratio, runs, runs,
                    100 * cmp.spread);
      break;
    case Significance::slower:
      std::snprintf(note, sizeof note, "%.2fx: slower (%d+%d runs, spread %.0f%%)", cmp.ratio, runs, runs,
                    100 * cmp.spread);
      break;
    default:
      std::snprintf(note, sizeof note, "no significant difference (%.2fx within a run-to-run spread of %.0f%%, %d+%d runs)",
                    cmp.ratio, 100 * cmp.spread, runs, runs);
  }
  shown.note = note;
  return shown;
}

TunedConfig tuned_config(const std::vector<TunedSetting>& settings) {
  nlohmann::json config = nlohmann::json::object();
  TunedConfig out;
  for (const TunedSetting& s : settings) {
    if (s.number)
      config[knob_key(s.flag)] = std::stoll(s.value);
    else
      config[knob_key(s.flag)] = s.value;
    out.flags += (out.flags.empty() ? "" : " ") + s.flag + " " + s.value;
  }
  out.json = config.dump(2) + "\n";
  return out;
}

std::string speedup_phrase(double speedup) {
  if (speedup == 1) return "(the starting point: no change made a significant difference)\n";
  char b[96];
  std::snprintf(b, sizeof b, "(%.2fx the starting point, from paired runs)\n", speedup);
  return b;
}

std::string deliver_config(const std::string& path, const std::string& config_json, const std::string& job,
                           bool interrupted) {
  const std::string what = interrupted ? "interrupted: the best of the completed trials" : "settings";
  if (path.empty())
    return what + " (save them with --write-config FILE, then `stoke " + job + " --config FILE ...`):\n" + config_json;
  write_file_atomic(path, std::string_view(config_json));
  return (interrupted ? what + ", written to " : "written to ") + path + " (use: stoke " + job + " --config " + path +
         " ...)\n";
}

}  // namespace stoke::tuning
