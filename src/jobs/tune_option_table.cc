// `stoke tune`'s own options (jobs/tune_job.h tune_option_table,
// tune_train_option_table): how long a trial runs, where the settings go and
// what a precision must keep to be taken. The starting point's flags are the
// tuned job's table (embed's, train's, without their output options).
#include "jobs/tune_job.h"

#include <algorithm>

namespace stoke {

namespace {

// --write-config FILE, the same for both.
template <class O>
Option<O> write_config_option() {
  return text_option<O>("--write-config", [](O& o) -> std::string& { return o.write_config; },
                        "Write the winning settings to FILE (a --config file); without it they are only printed",
                        kOfferCli, false);
}

// --try-precisions bf16,int8 (or the flag repeated, or a --config list): each
// word checked as --precision's words are, when given.
Option<TuneOptions> try_precisions_option() {
  Option<TuneOptions> o;
  o.flag = "--try-precisions";
  o.kind = OptionKind::list;
  o.help = "Also race these precisions (f32, bf16, f16, int8; comma-separated) against the one given: each changes "
           "every vector, so none is tried unless named, and each is measured against f32";
  o.offer = kOfferCli;
  o.type_name = "LIST";
  const std::string flag = o.flag;
  o.set = [flag](TuneOptions& opts, const std::string& text) {
    size_t at = 0;
    while (at <= text.size()) {
      const size_t end = std::min(text.find(',', at), text.size());
      const std::string word = text.substr(at, end - at);
      parse_precision(flag, word);  // refused here, in --precision's words; run_tune reads the enum
      opts.try_precisions.push_back(word);
      at = end + 1;
    }
  };
  return o;
}

OptionTable<TuneOptions> make_embed_table() {
  using O = TuneOptions;
  OptionTable<O> t;
  t.push_back(real_option<O>("--seconds-per-trial", [](O& o) -> double& { return o.seconds_per_trial; }, 0, 3600,
                             "How long each trial reads records", kOfferCli, /*lo_open=*/true));
  t.push_back(write_config_option<O>());
  t.push_back(try_precisions_option());
  t.push_back(real_option<O>("--min-cosine", [](O& o) -> double& { return o.min_cosine; }, -1, 1,
                             "bf16 or f16 is taken only if every embedding keeps this cosine to f32's", kOfferCli));
  t.push_back(real_option<O>("--min-centered-cosine", [](O& o) -> double& { return o.min_centered_cosine; }, -1, 1,
                             "A precision tried is taken only if its mean cosine to f32's, after removing the mean "
                             "vector, reaches this",
                             kOfferCli));
  t.push_back(int_option<O>("--max-workers", [](O& o) -> int64_t& { return o.max_workers; }, 0, max_workers(),
                            "Most tokenizer workers to try (0: the cores)", kOfferCli, max_workers_reason()));
  return t;
}

OptionTable<TuneTrainOptions> make_train_table() {
  using O = TuneTrainOptions;
  OptionTable<O> t;
  t.push_back(int_option<O>("--steps-per-trial", [](O& o) -> int64_t& { return o.steps_per_trial; }, 1, 1'000'000,
                            "Optimizer steps each trial runs", kOfferCli));
  t.push_back(write_config_option<O>());
  t.push_back(real_option<O>("--max-loss-change", [](O& o) -> double& { return o.max_loss_change; }, 0, 1000,
                             "bf16 is taken only if its loss after the trial stays this close to f32's (relative)",
                             kOfferCli));
  return t;
}

}  // namespace

const OptionTable<TuneOptions>& tune_option_table() {
  static const OptionTable<TuneOptions> table = make_embed_table();
  return table;
}

const OptionTable<TuneTrainOptions>& tune_train_option_table() {
  static const OptionTable<TuneTrainOptions> table = make_train_table();
  return table;
}

}  // namespace stoke
