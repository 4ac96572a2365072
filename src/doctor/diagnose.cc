#include "doctor/diagnose.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "core/error.h"

namespace stoke::doctor {

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::input: return "input-bound";
    case Bound::transfer: return "transfer-bound";
    case Bound::sync: return "sync-bound";
    case Bound::launch: return "launch-bound";
    case Bound::padding: return "padding-bound";
    case Bound::compute: return "compute-bound";
    case Bound::contention: return "cpu contention";
    case Bound::communication: return "communication-bound";
    case Bound::unknown: return "not bound by one stage";
  }
  return "?";
}

namespace {

std::string fmt(const char* f, double a) {
  char b[200];
  std::snprintf(b, sizeof b, f, a);
  return b;
}
std::string fmt(const char* f, double a, double c) {
  char b[200];
  std::snprintf(b, sizeof b, f, a, c);
  return b;
}
std::string pct(double x) { return fmt("%.0f%%", 100.0 * x); }

// The precision advice every compute-bound CPU run gets when it applies.
void precision_advice(Diagnosis& d, const std::string& precision, bool native_bf16) {
  if (precision == "f32" && native_bf16)
    d.advice.push_back("--precision f32 -> bf16: this CPU multiplies bf16 natively (AMX / AVX512-BF16); the GEMMs "
                       "run ~2x faster, at bf16's ~3 significant digits (stoke tune reports the difference)");
}

// Below this share of a core the compute thread is not getting its core.
// Idle, the CPU device's thread runs ~95-100% of the time it has work.
constexpr double kContendedShare = 0.7;
// Other processes must use at least this many cores' worth for the cause to
// be them (and not, say, stoke's own tokenizer threads on a small machine).
constexpr double kOthersMinCores = 0.25;

// The verdict, evidence and advice of a contended run.
void contention_verdict(Diagnosis& d, const CpuShares& s, int cores, int workers) {
  d.bound = Bound::contention;
  d.verdict = "cpu contention: other processes are taking this machine's cores; the compute thread got " +
              pct(s.compute) + " of a core while it had work";
  d.evidence.push_back("the compute (device) thread used " + pct(s.compute) +
                       " of one core during the time it was running work (idle machine: ~100%)");
  if (s.others >= 0)
    d.evidence.push_back(fmt("other processes used %.1f of this machine's ", s.others) + std::to_string(cores) +
                         (cores == 1 ? " core" : " cores") + " on average during the run");
  if (workers > 1)
    d.advice.push_back("--workers " + std::to_string(workers) + " -> " + std::to_string(workers - 1) +
                       ": fewer threads of ours compete with the others for the same cores");
  d.advice.push_back("OMP_NUM_THREADS=<free cores>: as many compute threads as cores the other processes leave");
  d.advice.push_back("run on a machine (or cores, taskset) no other job uses, or lower the others' priority "
                     "(nice -n 19 / renice)");
}

}  // namespace

bool cpu_contended(const CpuShares& s) {
  return s.compute >= 0 && s.compute < kContendedShare && (s.others < 0 || s.others >= kOthersMinCores);
}

namespace {

// GEMMs that ran on the plain fallback kernel: whatever bounds the run, they
// are time the vendor library would not have spent. Evidence and advice, not
// the verdict (the run's bound is still what the timings say).
void gemm_fallback_findings(Diagnosis& d, const std::vector<std::string>& fallbacks) {
  if (fallbacks.empty()) return;
  d.evidence.push_back(std::to_string(fallbacks.size()) +
                       (fallbacks.size() == 1 ? " GEMM shape" : " GEMM shapes") +
                       " ran on the plain fallback kernel (one thread per output: a small fraction of the vendor "
                       "library's rate):");
  const size_t shown = std::min<size_t>(fallbacks.size(), 5);
  for (size_t i = 0; i < shown; ++i) d.evidence.push_back("  " + fallbacks[i]);
  if (shown < fallbacks.size()) d.evidence.push_back("  ... and " + std::to_string(fallbacks.size() - shown) + " more");
  d.advice.push_back("every GEMM of a supported run should take cuBLASLt (docs/cuda.md, \"Which path each GEMM "
                     "takes\"): report the fallback lines above with the run's precision and model");
}

}  // namespace

Diagnosis diagnose_embed(const EmbedFacts& f) {
  Diagnosis d;
  d.job = "embed";
  d.seconds = f.seconds;
  const double wall = std::max(f.seconds, 1e-9);
  d.device_busy = f.device_busy >= 0 ? std::min(1.0, f.device_busy / wall) : 0.0;
  d.items_per_second = static_cast<double>(f.texts) / wall;
  d.tokens_per_second = static_cast<double>(f.real_tokens) / wall;
  d.host_syncs = f.host_syncs;
  d.steps = f.batches;
  d.padding_efficiency =
      f.computed_tokens > 0 ? static_cast<double>(f.real_tokens) / static_cast<double>(f.computed_tokens) : 1.0;
  d.stages = {f.read, f.tokenize, f.batch, f.write};
  d.stages.push_back(StageTime{"device", 1, std::max(0.0, f.device_busy), 0, 0});
  const double busy = d.device_busy;
  const double batches = static_cast<double>(std::max<uint64_t>(f.batches, 1));
  // Each batch needs one host sync: reading its results back.
  const double extra_syncs = f.host_syncs > f.batches ? static_cast<double>(f.host_syncs - f.batches) : 0.0;
  const double avg_batch = static_cast<double>(f.computed_tokens) / batches;
  const double starved = f.batch.wait_input / wall;  // batcher waiting for tokenized windows
  const double tok_load = f.tokenize.busy / wall, read_load = f.read.busy / wall;
  // The device stage bounds the run: busy most of the time, or busy more than
  // any host stage (per thread) — under contention a stalled pipeline fill
  // can keep it below 80% while it is still the stage everything waits on.
  const double host_max = std::max({f.read.busy, f.tokenize.busy / std::max(f.workers, 1), f.batch.busy, f.write.busy});
  const bool device_bottleneck = busy >= 0.8 || (busy >= 0.5 && f.device_busy >= host_max);

  d.evidence.push_back("the device was busy " + pct(busy) + " of " + fmt("%.2f s", f.seconds) +
                       fmt(" (%.0f texts/s, %.0f tokens/s)", d.items_per_second, d.tokens_per_second));
  d.evidence.push_back(fmt("%.0f host syncs for %.0f batches", static_cast<double>(f.host_syncs), batches) +
                       " (one per batch reads its results back)");
  d.evidence.push_back("tokenization busy " + pct(tok_load) + " of the time on " + std::to_string(f.workers) +
                       (f.workers == 1 ? " worker" : " workers") + ", reading " + pct(read_load) +
                       "; the batcher waited for tokenized texts " + pct(starved) + " of the time");
  d.evidence.push_back(fmt("%.0f tokens per batch on average (budget %.0f)", avg_batch,
                           static_cast<double>(f.batch_tokens)) +
                       ", padding efficiency " + fmt("%.2f", d.padding_efficiency));

  if (extra_syncs / batches >= 0.5) {
    d.bound = Bound::sync;
    d.verdict = "sync-bound: " + fmt("%.1f extra host syncs per batch", extra_syncs / batches) +
                " make the host wait for the device before it prepares the next batch, so the device idles " +
                pct(1.0 - busy) + " of the time";
    d.advice.push_back("remove the host read inside the loop (here --debug-sync-each-batch forces one per batch): "
                       "results need one sync per batch, nothing more");
  } else if (device_bottleneck && cpu_contended(f.cpu)) {
    contention_verdict(d, f.cpu, f.cores, f.workers);
  } else if (busy >= 0.8) {
    d.bound = Bound::compute;
    d.verdict = "compute-bound: the device was busy " + pct(busy) +
                " of the time; the pipeline keeps it fed, and the model's arithmetic is the limit";
    precision_advice(d, f.precision, f.native_bf16);
    if (avg_batch < 0.25 * static_cast<double>(f.batch_tokens) && f.stopped_early)
      d.advice.push_back("batches were small because the profile was short; a full run fills them");
    if (d.advice.empty()) d.advice.push_back("nothing to gain from the settings here: a faster device or a smaller model");
  } else if (starved >= 0.2 && tok_load < 0.5 && read_load < 0.5 && f.windows <= 2) {
    // Starved, though neither reading nor tokenizing is busy: the device
    // waited for the first window, which is read and tokenized whole before
    // its batches can be sorted.
    d.bound = Bound::input;
    d.verdict = "input-bound (pipeline fill): the device waited " + pct(starved) +
                " of the time for the first sort window to be read and tokenized; after that it never starved";
    const uint64_t smaller = std::max<uint64_t>(1024, f.sort_window / 16);
    d.advice.push_back("--sort-window " + std::to_string(f.sort_window) + " -> " + std::to_string(smaller) +
                       ": the first batches start after " + std::to_string(smaller) +
                       " records instead of the whole window (batches stay sorted within each window)");
  } else if (starved >= 0.2 || tok_load >= 0.7 || read_load >= 0.7) {
    d.bound = Bound::input;
    const bool tokenizing = tok_load >= read_load;
    d.verdict = std::string("input-bound (") + (tokenizing ? "tokenization" : "reading") + "): the device waited " +
                pct(1.0 - busy) + " of the time for " + (tokenizing ? "tokenized batches" : "records to be read");
    if (tokenizing) {
      // Workers to tokenize as fast as the device computes.
      const double device_s = std::max(f.device_busy, 1e-3);
      int want = static_cast<int>(std::ceil(static_cast<double>(f.workers) * f.tokenize.busy / device_s));
      want = std::max(want, f.workers + 1);
      const int cap = std::max(f.cores, 2);
      if (want > cap) want = cap;
      if (want > f.workers) {
        d.advice.push_back("--workers " + std::to_string(f.workers) + " -> " + std::to_string(want) +
                           ": tokenization needs " + fmt("%.1fx", f.tokenize.busy / device_s) +
                           " the device's time on one worker");
      }
      if (f.windows <= 1 && f.sort_window > 4096)
        d.advice.push_back("--sort-window " + std::to_string(f.sort_window) + " -> " +
                           std::to_string(std::max<uint64_t>(1024, f.sort_window / 16)) +
                           ": the input fit in one window, so every text was tokenized before the first batch; "
                           "smaller windows let tokenizing and computing overlap");
      if (f.cores <= 2)
        d.advice.push_back("this machine has " + std::to_string(f.cores) +
                           " cores shared by the tokenizer and the model: more cores (or a GPU for the model) "
                           "lift the ceiling");
    } else {
      d.advice.push_back("read from faster storage, or uncompressed JSONL/CSV; reading took " +
                         fmt("%.2f s", f.read.busy) + " of " + fmt("%.2f s", f.seconds));
    }
  } else if (d.padding_efficiency < 0.7) {
    d.bound = Bound::padding;
    d.verdict = "padding-bound: " + pct(1.0 - d.padding_efficiency) + " of the computed tokens are padding";
    d.advice.push_back("raise --sort-window so similar lengths share batches");
  } else if (avg_batch < 1024 && f.batches > 8) {
    d.bound = Bound::launch;
    d.verdict = "launch-bound: " + fmt("%.0f tokens per batch", avg_batch) +
                " is too little work per launch; fixed costs per op dominate and the device idles " + pct(1.0 - busy);
    d.advice.push_back("--batch-tokens " + std::to_string(f.batch_tokens) + " -> " +
                       std::to_string(std::max<int64_t>(f.batch_tokens * 4, 4096)));
  } else {
    d.bound = Bound::unknown;
    d.verdict = "no single stage bounds this run: the device was busy " + pct(busy) +
                " with no stage waiting long on another";
  }
  gemm_fallback_findings(d, f.gemm_fallbacks);
  return d;
}

namespace {

// The device (counted busy while it waits: the wait is a work item) stood
// still for the all-reduce: too little of it overlapped the backward.
void communication_verdict(Diagnosis& d, const TrainFacts& f) {
  const double wall = std::max(f.seconds, 1e-9);
  const double steps = static_cast<double>(std::max<uint64_t>(f.steps, 1));
  const double mb = static_cast<double>(f.allreduce_bytes_per_step) / (1 << 20);
  const double overlapped = f.comm_seconds > 0 ? std::max(0.0, 1.0 - f.comm_exposed_seconds / f.comm_seconds) : 0.0;
  d.bound = Bound::communication;
  d.verdict = "communication-bound: the device waited for the gradient all-reduce " +
              pct(f.comm_exposed_seconds / wall) + " of the time (" + std::to_string(f.ranks) + " ranks)";
  d.evidence.push_back(fmt("all-reduce of %.1f MiB of gradients per step: %.3f s per step, ", mb,
                           f.comm_seconds / steps) +
                       pct(overlapped) + fmt(" of it overlapped with the backward; %.3f s per step on the critical path",
                                             f.comm_exposed_seconds / steps));
  d.stages.push_back(StageTime{"all-reduce (waited for)", f.ranks, f.comm_exposed_seconds, 0, 0});
  d.advice.push_back("--bucket-mb " + std::to_string(f.bucket_mb) + " -> " + std::to_string(f.bucket_mb * 4) +
                     ": fewer, larger all-reduces (each pays the latency once)");
  d.advice.push_back("--grad-accum " + std::to_string(f.grad_accum) + " -> " + std::to_string(f.grad_accum * 4) +
                     ": one all-reduce per " + std::to_string(f.grad_accum * 4) +
                     " micro-batches instead of per " + std::to_string(f.grad_accum) +
                     " (with --lr-scale-from to keep the learning rate right)");
  d.advice.push_back(fmt("bf16 gradients would halve the %.1f MiB sent per step (stoke all-reduces f32 today)", mb));
}

}  // namespace

Diagnosis diagnose_train(const TrainFacts& f) {
  Diagnosis d;
  d.job = "train";
  d.seconds = f.seconds;
  const double wall = std::max(f.seconds, 1e-9);
  d.device_busy = f.device_busy >= 0 ? std::min(1.0, f.device_busy / wall) : 0.0;
  d.items_per_second = static_cast<double>(f.samples) / wall;
  d.tokens_per_second = static_cast<double>(f.tokens) / wall;
  d.host_syncs = f.host_syncs;
  d.steps = f.steps;
  d.stages.push_back(StageTime{"device", 1, std::max(0.0, f.device_busy), 0, 0});
  d.stages.push_back(StageTime{"host (packing, staging, waiting)", 1, 0, std::max(0.0, f.seconds - f.device_busy), 0});
  const double busy = d.device_busy;
  const double steps = static_cast<double>(std::max<uint64_t>(f.steps, 1));
  const double extra = f.host_syncs > f.expected_syncs ? static_cast<double>(f.host_syncs - f.expected_syncs) : 0.0;
  d.evidence.push_back("the device was busy " + pct(busy) + " of " + fmt("%.2f s", f.seconds) +
                       fmt(" (%.1f samples/s, %.0f tokens/s)", d.items_per_second, d.tokens_per_second));
  d.evidence.push_back(fmt("%.0f host syncs in %.0f steps", static_cast<double>(f.host_syncs), steps) +
                       fmt(" (the logging, evaluation and saving need %.0f)", static_cast<double>(f.expected_syncs)));
  if (extra / steps >= 0.5) {
    d.bound = Bound::sync;
    d.verdict = "sync-bound: " + fmt("%.1f host syncs per step", extra / steps) +
                " beyond logging make the host wait for the device inside the step; the device idles " +
                pct(1.0 - busy) + " of the time";
    d.advice.push_back("read the loss only at log steps (--log-every " + std::to_string(f.log_every) +
                       "); here --debug-sync-each-step forces a read every step");
  } else if (f.ranks > 1 && f.comm_exposed_seconds / wall >= kCommunicationBoundShare) {
    communication_verdict(d, f);
  } else if (busy >= 0.5 && cpu_contended(f.cpu)) {  // the step is the device's: it bounds the run
    contention_verdict(d, f.cpu, f.cores, 1);
  } else if (busy >= 0.8) {
    d.bound = Bound::compute;
    d.verdict = "compute-bound: the device was busy " + pct(busy) + " of the time";
    precision_advice(d, f.precision, f.native_bf16);
    if (d.advice.empty()) d.advice.push_back("nothing to gain from the settings here: a faster device or a smaller model");
  } else {
    d.bound = Bound::launch;
    d.verdict = "launch-bound: the device idles " + pct(1.0 - busy) + " of the time between small steps";
    d.advice.push_back("--batch-size " + std::to_string(f.batch_size) + " -> " + std::to_string(f.batch_size * 2) +
                       " (with --lr-scale-from " + std::to_string(f.batch_size) + " to keep the learning rate right)");
  }
  gemm_fallback_findings(d, f.gemm_fallbacks);
  return d;
}

namespace {

nlohmann::json stage_json(const StageTime& s) {
  return {{"name", s.name}, {"threads", s.threads}, {"busy", s.busy}, {"wait_input", s.wait_input},
          {"wait_output", s.wait_output}};
}
StageTime stage_from(const nlohmann::json& j) {
  return StageTime{j.at("name").get<std::string>(), j.at("threads").get<int>(), j.at("busy").get<double>(),
                   j.at("wait_input").get<double>(), j.at("wait_output").get<double>()};
}

nlohmann::json shares_json(const CpuShares& s) { return {{"compute", s.compute}, {"others", s.others}}; }
// Traces written before the shares were measured have none: unknown.
CpuShares shares_from(const nlohmann::json& facts) {
  CpuShares s;
  if (!facts.contains("cpu")) return s;
  s.compute = facts["cpu"].value("compute", -1.0);
  s.others = facts["cpu"].value("others", -1.0);
  return s;
}

}  // namespace

nlohmann::json to_json(const EmbedFacts& f) {
  return {{"seconds", f.seconds},
          {"device_busy", f.device_busy},
          {"read", stage_json(f.read)},
          {"tokenize", stage_json(f.tokenize)},
          {"batch", stage_json(f.batch)},
          {"write", stage_json(f.write)},
          {"result_wait", f.result_wait},
          {"batches", f.batches},
          {"host_syncs", f.host_syncs},
          {"texts", f.texts},
          {"real_tokens", f.real_tokens},
          {"computed_tokens", f.computed_tokens},
          {"workers", f.workers},
          {"cores", f.cores},
          {"batch_tokens", f.batch_tokens},
          {"sort_window", f.sort_window},
          {"windows", f.windows},
          {"precision", f.precision},
          {"native_bf16", f.native_bf16},
          {"stopped_early", f.stopped_early},
          {"cpu", shares_json(f.cpu)},
          {"gemm_fallbacks", f.gemm_fallbacks}};
}

nlohmann::json to_json(const TrainFacts& f) {
  return {{"seconds", f.seconds},       {"device_busy", f.device_busy}, {"steps", f.steps},
          {"samples", f.samples},       {"tokens", f.tokens},           {"host_syncs", f.host_syncs},
          {"expected_syncs", f.expected_syncs}, {"batch_size", f.batch_size}, {"log_every", f.log_every},
          {"precision", f.precision},   {"native_bf16", f.native_bf16}, {"cores", f.cores},
          {"cpu", shares_json(f.cpu)},  {"ranks", f.ranks},             {"grad_accum", f.grad_accum},
          {"bucket_mb", f.bucket_mb},   {"comm_seconds", f.comm_seconds},
          {"comm_exposed_seconds", f.comm_exposed_seconds},
          {"allreduce_bytes_per_step", f.allreduce_bytes_per_step},
          {"gemm_fallbacks", f.gemm_fallbacks}};
}

Diagnosis diagnose_from_json(const nlohmann::json& m) {
  try {
    const std::string job = m.at("job").get<std::string>();
    const nlohmann::json& j = m.at("facts");
    if (job == "embed" || job == "classify") {
      EmbedFacts f;
      f.seconds = j.at("seconds");
      f.device_busy = j.at("device_busy");
      f.read = stage_from(j.at("read"));
      f.tokenize = stage_from(j.at("tokenize"));
      f.batch = stage_from(j.at("batch"));
      f.write = stage_from(j.at("write"));
      f.result_wait = j.at("result_wait");
      f.batches = j.at("batches");
      f.host_syncs = j.at("host_syncs");
      f.texts = j.at("texts");
      f.real_tokens = j.at("real_tokens");
      f.computed_tokens = j.at("computed_tokens");
      f.workers = j.at("workers");
      f.cores = j.at("cores");
      f.batch_tokens = j.at("batch_tokens");
      f.sort_window = j.value("sort_window", uint64_t{0});
      f.windows = j.value("windows", uint64_t{0});
      f.precision = j.at("precision");
      f.native_bf16 = j.at("native_bf16");
      f.stopped_early = j.value("stopped_early", false);
      f.cpu = shares_from(j);
      f.gemm_fallbacks = j.value("gemm_fallbacks", std::vector<std::string>{});  // none in older traces
      Diagnosis d = diagnose_embed(f);
      d.job = job;
      return d;
    }
    if (job == "train") {
      TrainFacts f;
      f.seconds = j.at("seconds");
      f.device_busy = j.at("device_busy");
      f.steps = j.at("steps");
      f.samples = j.at("samples");
      f.tokens = j.at("tokens");
      f.host_syncs = j.at("host_syncs");
      f.expected_syncs = j.at("expected_syncs");
      f.batch_size = j.at("batch_size");
      f.log_every = j.at("log_every");
      f.precision = j.at("precision");
      f.native_bf16 = j.at("native_bf16");
      f.cores = j.value("cores", 1);
      f.cpu = shares_from(j);
      // Traces of one-process runs (and from before data parallelism) have none.
      f.ranks = j.value("ranks", 1);
      f.grad_accum = j.value("grad_accum", int64_t{1});
      f.bucket_mb = j.value("bucket_mb", int64_t{25});
      f.comm_seconds = j.value("comm_seconds", 0.0);
      f.comm_exposed_seconds = j.value("comm_exposed_seconds", 0.0);
      f.allreduce_bytes_per_step = j.value("allreduce_bytes_per_step", uint64_t{0});
      f.gemm_fallbacks = j.value("gemm_fallbacks", std::vector<std::string>{});  // none in older traces
      return diagnose_train(f);
    }
    if (job == "serve") return diagnose_serve(j);
    throw Error(Errc::format, "doctor: unknown job \"" + job + "\" in the trace's metadata");
  } catch (const nlohmann::json::exception& e) {
    throw Error(Errc::format, std::string("doctor: the trace's metadata is not a stoke run summary: ") + e.what());
  }
}

std::string format_diagnosis(const Diagnosis& d) {
  std::string out = "stoke doctor: " + d.job + (d.device.empty() ? "" : " on " + d.device) + "\n\n  " + d.verdict +
                    "\n\nevidence\n";
  for (const auto& e : d.evidence) out += "  - " + e + "\n";
  out += "\nadvice\n";
  for (const auto& a : d.advice) out += "  - " + a + "\n";
  if (!d.stages.empty()) {
    out += "\nstages (seconds: busy / waiting for input / waiting for output)\n";
    for (const auto& s : d.stages) {
      char line[160];
      std::snprintf(line, sizeof line, "  %-34s %8.3f %8.3f %8.3f\n", s.name.c_str(), s.busy, s.wait_input,
                    s.wait_output);
      out += line;
    }
  }
  return out;
}

}  // namespace stoke::doctor
