// `stoke doctor`: runs a short, instrumented embed or train job (or reads a
// trace a run wrote) and says in plain words what bounds it, with evidence and
// advice in numbers; optionally a self-contained HTML report.
#pragma once

#include <string>

#include "doctor/diagnose.h"
#include "doctor/diagnosis.h"
#include "jobs/embed_job.h"
#include "jobs/option_table.h"
#include "jobs/train_job.h"

namespace stoke {

struct DoctorOptions {
  std::string job;            // "embed" or "train"; "" with trace_in
  EmbedOptions embed;         // the job's own flags
  TrainOptions train;
  double seconds = 15;        // --seconds: embed reads records for this long (into a temporary output)
  int64_t steps = 30;         // --steps: optimizer steps of a profiled training run (when --max-steps is not given)
  std::string html;           // --html FILE
  std::string trace_in;       // `stoke doctor --trace FILE`: diagnose a trace written by a run
};

// Which form of `stoke doctor` takes each of its own options (the `uses`
// bits of doctor_option_table()'s entries).
enum DoctorFlag : unsigned {
  kDoctorReadsTrace = 1,     // `stoke doctor --trace FILE`
  kDoctorProfilesEmbed = 2,  // `stoke doctor embed ...`
  kDoctorProfilesTrain = 4,  // `stoke doctor train ...`
};

// doctor's own options (jobs/doctor_option_table.cc), each under the forms
// its `uses` names; the profiled job's flags come from that job's table. The
// CLI and --config read them (Python has no doctor).
const OptionTable<DoctorOptions>& doctor_option_table();

struct DoctorResult {
  doctor::Diagnosis diagnosis;
  std::string text;           // what the terminal shows
  std::string output;         // where the profiled run wrote (a temporary folder is removed: "")
  bool stopped = false;       // a stop (core/stop_request.h) cut the profiled run short: diagnosed as far as it went
};

DoctorResult run_doctor(const DoctorOptions& options);

// What a finished run measured, as the doctor's rules take it (also stored in
// the metadata of every trace a job writes, so `stoke doctor --trace FILE`
// diagnoses it).
doctor::EmbedFacts embed_facts(const EmbedSummary& summary);
doctor::EmbedFacts pipeline_facts(const PipelineStats& stats, int workers, int64_t batch_tokens,
                                  uint64_t sort_window, const std::string& precision, bool native_bf16);
doctor::TrainFacts train_facts(const TrainSummary& summary);

}  // namespace stoke
