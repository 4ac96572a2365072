#include "jobs/doctor_job.h"

#include <filesystem>
#include <fstream>
#include <thread>

#include "core/cpu_sampler.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/machine_load.h"
#include "core/trace.h"
#include "doctor/diagnose.h"
#include "doctor/html_report.h"
#include "doctor/trace_reader.h"
#include "io/atomic_file.h"

namespace stoke {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

int cores() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

// Spans and utilization for the report, from what the run recorded.
void attach_timeline(doctor::Diagnosis& d, const Trace& trace, const CpuSampler& sampler) {
  const doctor::ParsedTrace parsed = doctor::parse_trace(trace.to_json(), "the profiled run's trace");
  d.spans = parsed.spans;
  d.utilization = sampler.samples();
}

// The CPU shares behind the contention verdict. On a CPU device the "device"
// thread computes (OpenMP's master); CPU seconds over the seconds it had work
// say how much of a core it got. A GPU's host thread waits by design: no share.
doctor::CpuShares cpu_shares(const std::string& device, double device_busy, const CpuSampler& sampler,
                             const MachineLoadReading& before, const MachineLoadReading& after) {
  doctor::CpuShares s;
  s.others = other_processes_cores(before, after);
  const double cpu = sampler.cpu_seconds("device");
  if (device == "cpu" && device_busy > 0.05 && cpu > 0) s.compute = std::min(1.0, cpu / device_busy);
  return s;
}

void finish(DoctorResult& r, const DoctorOptions& o, Trace& trace, const json& metadata, const std::string& trace_out) {
  trace.set_metadata(metadata.dump());
  if (!trace_out.empty()) write_file_atomic(trace_out, std::string_view(trace.to_json()));
  if (!o.html.empty()) write_file_atomic(o.html, std::string_view(doctor::render_html_report(r.diagnosis)));
  r.text = doctor::format_diagnosis(r.diagnosis);
}

DoctorResult doctor_embed(const DoctorOptions& o) {
  DoctorResult r;
  EmbedOptions e = o.embed;
  std::unique_ptr<TempFolder> temp;
  if (e.output.empty()) {
    temp = std::make_unique<TempFolder>("stoke-doctor");
    e.output = (temp->path() / "out").string();
    e.stop_after_seconds = o.seconds;  // a temporary output may hold a prefix
    e.int8_quality_sample = false;     // a profile of the pipeline, into a folder no one keeps
  } else {
    r.output = e.output;
  }
  const std::string trace_out = e.common.trace;
  e.common.trace.clear();
  Trace trace;
  CpuSampler sampler(&trace);
  e.trace = &trace;
  e.on_thread_start = [&sampler](const std::string& name) { sampler.watch_current_thread(name); };
  sampler.start();
  const MachineLoadReading before = read_machine_load();
  const EmbedSummary s = run_embed(e);
  const MachineLoadReading after = read_machine_load();
  sampler.stop();
  const PipelineStats& p = s.pipeline;
  doctor::EmbedFacts f = embed_facts(s);
  f.cpu = cpu_shares(s.device, p.device_busy, sampler, before, after);
  r.diagnosis = doctor::diagnose_embed(f);
  r.diagnosis.device = s.device;
  r.stopped = s.cancelled;
  if (s.cancelled)
    r.diagnosis.evidence.push_back("stopped by a signal after " + std::to_string(p.submitted_texts) +
                                   " texts: diagnosed as far as the run went");
  else if (p.stopped_early)
    r.diagnosis.evidence.push_back("profiled " + std::to_string(p.submitted_texts) + " texts (--seconds " +
                                   std::to_string(static_cast<int>(o.seconds)) + ")");
  attach_timeline(r.diagnosis, trace, sampler);
  finish(r, o, trace, json{{"job", "embed"}, {"facts", doctor::to_json(f)}}, trace_out);
  return r;
}

DoctorResult doctor_train(const DoctorOptions& o) {
  DoctorResult r;
  TrainOptions t = o.train;
  std::unique_ptr<TempFolder> temp;
  if (t.output.empty()) {
    temp = std::make_unique<TempFolder>("stoke-doctor");
    t.output = (temp->path() / "out").string();
  } else {
    r.output = t.output;
  }
  if (t.max_steps <= 0) t.max_steps = o.steps;
  const std::string trace_out = t.common.trace;
  t.common.trace.clear();
  Trace trace;
  CpuSampler sampler(&trace);
  t.trace = &trace;
  t.on_thread_start = [&sampler](const std::string& name) { sampler.watch_current_thread(name); };
  sampler.start();
  const MachineLoadReading before = read_machine_load();
  const TrainSummary s = run_train(t);
  const MachineLoadReading after = read_machine_load();
  sampler.stop();
  doctor::TrainFacts f = train_facts(s);
  f.cpu = cpu_shares(s.device, s.device_busy_seconds, sampler, before, after);
  r.diagnosis = doctor::diagnose_train(f);
  r.diagnosis.device = s.device;
  r.stopped = s.stopped;
  if (s.stopped)
    r.diagnosis.evidence.push_back("stopped by a signal at step " + std::to_string(s.steps) +
                                   ": diagnosed as far as the run went");
  attach_timeline(r.diagnosis, trace, sampler);
  finish(r, o, trace, json{{"job", "train"}, {"facts", doctor::to_json(f)}}, trace_out);
  return r;
}

}  // namespace

doctor::EmbedFacts embed_facts(const EmbedSummary& s) {
  doctor::EmbedFacts f = pipeline_facts(s.pipeline, s.workers, s.batch_tokens, s.sort_window, s.precision,
                                        s.native_bf16);
  f.gemm_fallbacks = s.gemm_fallbacks;
  return f;
}

doctor::EmbedFacts pipeline_facts(const PipelineStats& p, int workers, int64_t batch_tokens, uint64_t sort_window,
                                  const std::string& precision, bool native_bf16) {
  doctor::EmbedFacts f;
  f.seconds = p.seconds;
  f.device_busy = p.device_busy;
  f.read = {"read", 1, p.read.busy, p.read.wait_input, p.read.wait_output};
  f.tokenize = {"tokenize", workers, p.tokenize.busy, p.tokenize.wait_input, p.tokenize.wait_output};
  f.batch = {"batch + enqueue", 1, p.batch.busy, p.batch.wait_input, p.batch.wait_output};
  f.write = {"write", 1, p.write.busy, p.write.wait_input + p.result_wait, p.write.wait_output};
  f.result_wait = p.result_wait;
  f.batches = p.batches;
  f.host_syncs = p.host_syncs;
  f.texts = p.submitted_texts;
  f.real_tokens = p.real_tokens;
  f.computed_tokens = p.computed_tokens;
  f.workers = workers;
  f.cores = cores();
  f.batch_tokens = batch_tokens;
  f.sort_window = sort_window;
  f.windows = p.windows;
  f.precision = precision;
  f.native_bf16 = native_bf16;
  f.stopped_early = p.stopped_early;
  return f;
}

doctor::TrainFacts train_facts(const TrainSummary& s) {
  doctor::TrainFacts f;
  f.seconds = s.seconds;
  f.device_busy = s.device_busy_seconds;
  f.steps = static_cast<uint64_t>(s.steps);
  f.samples = s.samples;
  f.tokens = s.tokens;
  f.host_syncs = s.host_syncs;
  f.expected_syncs = s.expected_syncs;
  f.batch_size = s.batch_size;
  f.log_every = s.log_every;
  f.precision = s.precision;
  f.native_bf16 = s.native_bf16;
  f.cores = cores();
  f.gemm_fallbacks = s.gemm_fallbacks;
  f.ranks = s.ranks;
  f.grad_accum = s.grad_accum;
  f.bucket_mb = s.bucket_mb;
  f.comm_seconds = s.comm_seconds;
  f.comm_exposed_seconds = s.comm_exposed_seconds;
  f.allreduce_bytes_per_step = s.allreduce_bytes_per_step;
  return f;
}

DoctorResult run_doctor(const DoctorOptions& o) {
  if (!o.trace_in.empty()) {
    DoctorResult r;
    const doctor::ParsedTrace parsed = doctor::parse_trace(read_file(o.trace_in), o.trace_in);
    if (parsed.metadata_json.empty())
      throw Error(Errc::format, o.trace_in + ": no run summary in the trace (\"otherData\"); write traces with "
                                             "`stoke doctor ... --trace FILE` or a job's --trace");
    r.diagnosis = doctor::diagnose_from_json(json::parse(parsed.metadata_json));
    r.diagnosis.spans = parsed.spans;
    r.diagnosis.utilization = parsed.utilization;
    if (!o.html.empty()) write_file_atomic(o.html, std::string_view(doctor::render_html_report(r.diagnosis)));
    r.text = doctor::format_diagnosis(r.diagnosis);
    return r;
  }
  if (o.seconds <= 0) throw Error(Errc::invalid_argument, "--seconds must be positive");
  if (o.job == "embed") return doctor_embed(o);
  if (o.job == "train") return doctor_train(o);
  throw Error(Errc::invalid_argument, "stoke doctor: name a job (embed or train), or --trace FILE");
}

}  // namespace stoke
