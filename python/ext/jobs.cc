#include "jobs.h"

#include <atomic>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/error.h"
#include "jobs/embed_job.h"
#include "jobs/verify_job.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoke::py {

namespace {

// Reads the keyword options of embed_job into the CLI's option struct. Names
// are the CLI's flags with underscores (--batch-tokens: batch_tokens); an
// unknown name is refused, naming it.
class OptionReader {
 public:
  explicit OptionReader(nb::dict d) : d_(d) {}
  template <class T>
  void read(const char* name, T& into) {
    seen_.insert(name);
    if (!d_.contains(name)) return;
    nb::handle v = d_[name];
    if (v.is_none()) return;
    if (!nb::try_cast(v, into))
      throw Error(Errc::invalid_argument,
                  std::string(name) + ": expected " + expected<T>() + ", got " + nb::type_name(v.type()).c_str());
  }
  void check_unknown() const {
    for (auto [k, v] : d_) {
      const std::string key = nb::cast<std::string>(k);
      if (!seen_.count(key)) throw Error(Errc::invalid_argument, "embed_job: unknown option " + key);
    }
  }

 private:
  template <class T>
  static const char* expected() {
    if constexpr (std::is_same_v<T, bool>) return "True or False";
    else if constexpr (std::is_same_v<T, std::string>) return "a str";
    else if constexpr (std::is_same_v<T, double>) return "a number";
    else return "an int";
  }
  nb::dict d_;
  std::set<std::string> seen_;
};

// The manifest's "quality" (--precision int8), as the manifest spells it.
nb::dict quality_dict(const EmbedQuality& q) {
  nb::dict d;
  const nlohmann::ordered_json j = to_json(q);
  for (auto it = j.begin(); it != j.end(); ++it) {
    const char* key = it.key().c_str();
    if (it->is_string()) d[key] = it->get<std::string>();
    else if (it->is_number_unsigned()) d[key] = it->get<uint64_t>();
    else if (it->is_number()) d[key] = it->get<double>();
    else d[key] = nb::none();  // NaN agreement (a NaN row) is written as null
  }
  d["kept"] = q.kept;  // read from the first run's manifest (a resume)
  return d;
}

nb::dict summary_dict(const EmbedSummary& s) {
  nb::dict d;
  d["texts"] = s.texts;
  d["tokens"] = s.tokens;
  d["truncated"] = s.truncated;
  d["replaced_utf8"] = s.replaced_utf8;
  d["batches"] = s.batches;
  d["records"] = s.records;
  d["skipped"] = s.skipped;
  d["other_tasks"] = s.other_tasks;
  d["resumed"] = s.resumed;
  d["shards"] = s.shards;
  d["already_complete"] = s.already_complete;
  d["notes"] = s.notes;
  d["bound_by"] = s.bound_by;
  d["padding_efficiency"] = s.padding_efficiency;
  d["dimensions"] = s.dims;
  d["max_length"] = s.max_length;
  d["pooling"] = s.pooling;
  d["normalize"] = s.normalize;
  d["precision"] = s.precision;
  d["device"] = s.device;
  d["seconds"] = s.seconds;
  d["host_syncs"] = s.host_syncs;
  d["workers"] = s.workers;
  d["batch_tokens"] = s.batch_tokens;
  if (s.quality)
    d["quality"] = quality_dict(*s.quality);
  else
    d["quality"] = nb::none();
  return d;
}

// Runs the job on a thread of its own while this one (Python's main thread,
// where signal handlers run) polls for signals: Ctrl-C sets the job's cancel
// flag, the job stops between batches with its last commit standing (as a
// kill leaves it: resume=True continues), and the handler's exception
// (KeyboardInterrupt) is raised here once the job has returned.
EmbedSummary run_embed_interruptible(EmbedOptions& o) {
  std::atomic<bool> cancel{false};
  o.cancel = &cancel;
  bool interrupted = false;
  std::future<EmbedSummary> job;
  {
    nb::gil_scoped_release nogil;
    job = std::async(std::launch::async, [&o] {
      resolve_model_flag(o.common);
      return run_embed(o);
    });
    while (job.wait_for(std::chrono::milliseconds(50)) != std::future_status::ready) {
      if (interrupted) continue;
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) {
        interrupted = true;
        cancel.store(true, std::memory_order_relaxed);
      }
    }
  }
  if (interrupted) {
    try {
      job.get();  // what the cancelled run threw, if anything, gives way to the interrupt
    } catch (...) {
    }
    throw nb::python_error();  // the handler's exception, still set on this thread
  }
  return job.get();  // ready: rethrows the job's Error for the translators (errors.cc)
}

nb::dict embed_job(const std::string& model, const std::string& input, const std::string& output, nb::dict flags) {
  EmbedOptions o;
  o.common.model = model;
  o.common.input = input;
  o.output = output;
  o.common.quiet = true;
  OptionReader r(flags);
  bool progress = false;
  int64_t max_length = 0;
  r.read("progress", progress);
  o.common.quiet = !progress;
  r.read("input_format", o.common.input_format);
  r.read("text_field", o.common.text_field);
  r.read("id_field", o.common.id_field);
  r.read("max_length", max_length);
  if (max_length != 0) o.common.max_length = max_length;
  r.read("device", o.common.device);
  r.read("precision", o.common.precision);
  r.read("workers", o.common.workers);
  r.read("batch_tokens", o.common.batch_tokens);
  r.read("trace", o.common.trace);
  r.read("pooling", o.pooling);
  bool normalize = false;
  if (flags.contains("normalize") && !flags["normalize"].is_none()) {
    r.read("normalize", normalize);
    o.normalize = normalize;
  } else {
    r.read("normalize", normalize);
  }
  r.read("dimensions", o.dimensions);
  r.read("prompt", o.prompt);
  r.read("prompt_name", o.prompt_name);
  r.read("output_dtype", o.output_dtype);
  r.read("max_batch_size", o.max_batch_size);
  r.read("overwrite", o.overwrite);
  r.read("resume", o.resume);
  r.read("on_error", o.on_error);
  r.read("sort_window", o.sort_window);
  r.read("shard_size", o.shard_size);
  r.read("shard_index", o.shard_index);
  r.read("num_shards", o.num_shards);
  r.read("min_centered_cosine", o.min_centered_cosine);
  r.check_unknown();
  return summary_dict(run_embed_interruptible(o));
}

nb::dict verify(const std::vector<std::string>& folders) {
  VerifyReport rep;
  {
    nb::gil_scoped_release nogil;
    rep = run_verify(folders);
  }
  nb::dict d;
  d["problems"] = rep.problems;
  d["notes"] = rep.notes;
  d["folders"] = rep.folders;
  d["tasks"] = rep.tasks;
  d["records"] = rep.records;
  d["rows"] = rep.rows;
  d["skipped"] = rep.skipped;
  return d;
}

}  // namespace

void register_jobs(nb::module_& m) {
  m.def("embed_job", &embed_job, "model"_a, "input"_a, "output"_a, "flags"_a);
  m.def("verify", &verify, "folders"_a);
}

}  // namespace stoke::py
