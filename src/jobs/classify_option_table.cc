// `stoke classify`'s options (jobs/classify_job.h classify_option_table): the
// common options classify takes, then its own.
#include "jobs/classify_job.h"
#include "jobs/record_output_options.h"

namespace stoke {

namespace {

using O = ClassifyOptions;

OptionTable<O> make_table() {
  OptionTable<O> t;
  for (const Option<CommonOptions>& c : common_option_table())
    if (job_takes(c, kClassifyFlags)) t.push_back(lift_option<O>(c, [](O& o) -> CommonOptions& { return o.common; }));
  add_record_output_options(t, "Output JSONL, one line per input record; - is stdout");
  t.push_back(int_option<O>("--max-batch-size", [](O& o) -> int64_t& { return o.max_batch_size; }, 1, 1 << 20,
                            "Sequences per batch at most", kOfferCli));
  return t;
}

}  // namespace

const OptionTable<ClassifyOptions>& classify_option_table() {
  static const OptionTable<ClassifyOptions> table = make_table();
  return table;
}

}  // namespace stoke
