#include "jobs.h"

#include <atomic>
#include <cstdio>
#include <chrono>
#include <future>
#include <set>
#include <string>
#include <vector>

#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "core/error.h"
#include "jobs/embed_job.h"
#include "jobs/option_table.h"
#include "jobs/verify_job.h"

namespace nb = nanobind;
using namespace nb::literals;

namespace stoke::py {

namespace {

// Reads a job's keyword options through its option table (jobs/option_table.h):
// each name is a table entry's Python name (--batch-tokens: batch_tokens)
// offered to Python, its value checked as the CLI checks it — the same set()
// — after its Python type is checked against the entry's kind. A flag
// entry with a --no-X partner takes X=False as that partner. An unknown name
// is refused, naming it and the names there are.
template <class O>
class TableOptionReader {
 public:
  TableOptionReader(const OptionTable<O>& table, unsigned job_mask, const char* job)
      : table_(table), mask_(job_mask), job_(job) {}

  // Every entry of `flags` but the names in `own` (the binding's own keywords).
  void apply(nb::dict flags, O& options, const std::set<std::string>& own) const {
    for (auto [k, v] : flags) {
      const std::string name = nb::cast<std::string>(k);
      if (own.count(name) || v.is_none()) continue;
      const Option<O>* e = entry(name);
      if (!e) throw Error(Errc::invalid_argument, std::string(job_) + ": unknown option " + name + " (" + names() + ")");
      set(*e, name, v, options);
    }
  }
  std::vector<std::string> python_names() const {
    std::vector<std::string> out;
    for (const Option<O>& e : table_)
      if ((e.offer & kOfferPython) && job_takes(e, mask_)) out.push_back(e.python_name());
    return out;
  }

 private:
  const Option<O>* entry(const std::string& name) const {
    for (const Option<O>& e : table_)
      if ((e.offer & kOfferPython) && job_takes(e, mask_) && e.python_name() == name) return &e;
    return nullptr;
  }
  std::string names() const {
    std::string s;
    for (const std::string& n : python_names()) s += (s.empty() ? "" : ", ") + n;
    return s;
  }
  [[noreturn]] static void wrong_type(const std::string& name, const char* expected, nb::handle v) {
    throw Error(Errc::invalid_argument,
                name + ": expected " + expected + ", got " + std::string(nb::type_name(v.type()).c_str()));
  }
  void set(const Option<O>& e, const std::string& name, nb::handle v, O& options) const {
    const bool is_bool = nb::isinstance<nb::bool_>(v);
    switch (e.kind) {
      case OptionKind::flag: {
        if (!is_bool) wrong_type(name, "True or False", v);
        const bool on = nb::cast<bool>(v);
        const Option<O>* negation = on ? nullptr : find_option(table_, "--no-" + e.flag.substr(2));
        if (negation) negation->set(options, "true");
        else e.set(options, on ? "true" : "false");
        return;
      }
      case OptionKind::integer:
        if (is_bool || !nb::isinstance<nb::int_>(v)) wrong_type(name, "an int", v);
        e.set(options, std::to_string(nb::cast<int64_t>(v)));
        return;
      case OptionKind::real:
        if (is_bool || !(nb::isinstance<nb::int_>(v) || nb::isinstance<nb::float_>(v))) wrong_type(name, "a number", v);
        {
          char buf[40];
          std::snprintf(buf, sizeof buf, "%.17g", nb::cast<double>(v));
          e.set(options, buf);
        }
        return;
      default:
        // --shard-index and --num-shards take a number too (or "auto").
        if (nb::isinstance<nb::int_>(v) && !is_bool && e.type_name == "INT|auto") {
          e.set(options, std::to_string(nb::cast<int64_t>(v)));
          return;
        }
        if (!nb::isinstance<nb::str>(v)) wrong_type(name, "a str", v);
        e.set(options, nb::cast<std::string>(v));
        return;
    }
  }

  const OptionTable<O>& table_;
  unsigned mask_;
  const char* job_;
};

// embed_job's keywords: embed's table as `stoke embed` has it.
const TableOptionReader<EmbedOptions>& embed_reader() {
  static const TableOptionReader<EmbedOptions> r(embed_option_table(), kEmbedFlags | kEmbedOutputOptions, "embed_job");
  return r;
}

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
  bool progress = false;
  if (flags.contains("progress") && !flags["progress"].is_none()) {
    if (!nb::isinstance<nb::bool_>(flags["progress"]))
      throw Error(Errc::invalid_argument, "progress: expected True or False");
    progress = nb::cast<bool>(flags["progress"]);
  }
  o.common.quiet = !progress;
  embed_reader().apply(flags, o, {"progress"});
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
  // The keywords embed_job takes, from embed's option table (the docstring
  // of stoke.embed_job is checked against it: tests/python).
  m.def("embed_job_options", [] {
    std::vector<std::string> names = embed_reader().python_names();
    names.push_back("progress");
    return names;
  });
  m.def("verify", &verify, "folders"_a);
}

}  // namespace stoke::py
