// `stoke doctor`'s own options (jobs/doctor_job.h doctor_option_table): the
// trace it reads, the report it writes, how long it profiles. The profiled
// job's flags are that job's table (embed's, train's).
#include "jobs/doctor_job.h"

namespace stoke {

namespace {

using O = DoctorOptions;

OptionTable<O> make_table() {
  OptionTable<O> t;
  auto add = [&t](Option<O> o, unsigned uses) {
    o.uses = uses;
    t.push_back(std::move(o));
  };
  add(text_option<O>("--trace", [](O& o) -> std::string& { return o.trace_in; },
                     "Diagnose a trace a run wrote (stoke embed/train --trace FILE)", kOfferCli, false),
      kDoctorReadsTrace);
  // --html twice: the same field, said in fewer words under a profiled job.
  add(text_option<O>("--html", [](O& o) -> std::string& { return o.html; },
                     "Also write a self-contained HTML report (timeline, per-stage bars)", kOfferCli, false),
      kDoctorReadsTrace);
  add(real_option<O>("--seconds", [](O& o) -> double& { return o.seconds; }, 0, 86400,
                     "Read records for this long (into a temporary output; with --output the whole run is profiled)",
                     kOfferCli, /*lo_open=*/true),
      kDoctorProfilesEmbed);
  add(int_option<O>("--steps", [](O& o) -> int64_t& { return o.steps; }, 1, 1'000'000,
                    "Optimizer steps to profile when --max-steps is not given", kOfferCli),
      kDoctorProfilesTrain);
  add(text_option<O>("--html", [](O& o) -> std::string& { return o.html; }, "Also write a self-contained HTML report",
                     kOfferCli, false),
      kDoctorProfilesEmbed | kDoctorProfilesTrain);
  return t;
}

}  // namespace

const OptionTable<DoctorOptions>& doctor_option_table() {
  static const OptionTable<DoctorOptions> table = make_table();
  return table;
}

}  // namespace stoke
