#include "doctor/trace_reader.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/error.h"

namespace stoke::doctor {

namespace {

using json = nlohmann::json;

[[noreturn]] void fail(const std::string& label, const std::string& what) {
  throw Error(Errc::format, label + ": not a readable trace: " + what);
}

// A number field of an event, or NaN when absent; anything else is an error.
double number_field(const json& e, const char* key, size_t index, const std::string& label, bool required) {
  auto it = e.find(key);
  if (it == e.end()) {
    if (required) fail(label, "event " + std::to_string(index) + " has no \"" + key + "\"");
    return std::numeric_limits<double>::quiet_NaN();
  }
  if (!it->is_number())
    fail(label, "event " + std::to_string(index) + ": \"" + key + "\" is " + it->type_name() + ", expected a number");
  const double v = it->get<double>();
  if (!std::isfinite(v)) fail(label, "event " + std::to_string(index) + ": \"" + key + "\" is not finite");
  return v;
}

// pid and tid may be numbers or strings in the trace-event format.
std::string id_text(const json& e, const char* key) {
  auto it = e.find(key);
  if (it == e.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_integer()) return std::to_string(it->get<int64_t>());
  return it->dump();
}

ParsedTrace parse_events(const std::string& json_text, const std::string& label) {
  json root;
  try {
    root = json::parse(json_text);
  } catch (const json::parse_error& e) {
    fail(label, std::string("invalid JSON (") + e.what() + ")");
  }
  ParsedTrace out;
  const json* events = nullptr;
  if (root.is_array()) {
    events = &root;
  } else if (root.is_object()) {
    auto it = root.find("traceEvents");
    if (it == root.end()) fail(label, "no \"traceEvents\" array");
    if (!it->is_array()) fail(label, "\"traceEvents\" is " + std::string(it->type_name()) + ", expected an array");
    events = &*it;
    if (auto md = root.find("otherData"); md != root.end()) {
      if (!md->is_object()) fail(label, "\"otherData\" is " + std::string(md->type_name()) + ", expected an object");
      out.metadata_json = md->dump();
    }
  } else {
    fail(label, "top level is " + std::string(root.type_name()) + ", expected an object or an array");
  }

  // First pass: thread names, and which pids occur (tids are only unique per pid).
  std::map<std::pair<std::string, std::string>, std::string> thread_names;
  std::vector<std::string> pids;
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    if (!e.is_object()) fail(label, "event " + std::to_string(i) + " is " + e.type_name() + ", expected an object");
    auto ph = e.find("ph");
    if (ph == e.end() || !ph->is_string()) fail(label, "event " + std::to_string(i) + " has no string \"ph\"");
    const std::string pid = id_text(e, "pid");
    if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    auto name = e.find("name");
    if (*ph == "M" && name != e.end() && name->is_string() && *name == "thread_name") {
      auto args = e.find("args");
      if (args == e.end() || !args->is_object() || !args->contains("name") || !(*args)["name"].is_string())
        fail(label, "event " + std::to_string(i) + ": thread_name without a string args.name");
      thread_names[{pid, id_text(e, "tid")}] = (*args)["name"].get<std::string>();
    }
  }
  // Several threads may share a name (a pool whose threads all call
  // themselves "tokenizer"): each keeps a lane of its own, "tokenizer #1",
  // "tokenizer #2", numbered in the order their names were given.
  {
    std::map<std::string, std::vector<std::pair<std::string, std::string>>> keys_of;
    for (size_t i = 0; i < events->size(); ++i) {
      const json& e = (*events)[i];
      auto name = e.find("name");
      if (e["ph"] == "M" && name != e.end() && name->is_string() && *name == "thread_name") {
        const std::pair<std::string, std::string> key{id_text(e, "pid"), id_text(e, "tid")};
        auto& keys = keys_of[thread_names[key]];
        if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
      }
    }
    for (const auto& [name, keys] : keys_of)
      if (keys.size() > 1)
        for (size_t k = 0; k < keys.size(); ++k) thread_names[keys[k]] = name + " #" + std::to_string(k + 1);
  }
  const bool many_pids = pids.size() > 1;
  auto thread_of = [&](const json& e) {
    const std::string pid = id_text(e, "pid"), tid = id_text(e, "tid");
    if (auto it = thread_names.find({pid, tid}); it != thread_names.end()) return it->second;
    return many_pids ? "thread " + pid + ":" + tid : "thread " + tid;
  };

  // Second pass: spans and counters in microseconds; shifted to seconds from
  // the earliest at the end.
  double t0 = std::numeric_limits<double>::infinity();
  for (size_t i = 0; i < events->size(); ++i) {
    const json& e = (*events)[i];
    const std::string ph = e["ph"].get<std::string>();
    if (ph == "X") {
      const double ts = number_field(e, "ts", i, label, true);
      const double dur = number_field(e, "dur", i, label, false);
      auto name = e.find("name");
      if (name == e.end() || !name->is_string()) fail(label, "event " + std::to_string(i) + " has no string \"name\"");
      if (dur < 0) fail(label, "event " + std::to_string(i) + " has a negative \"dur\"");
      out.spans.push_back(Span{thread_of(e), name->get<std::string>(), ts, std::isnan(dur) ? 0.0 : dur});
      t0 = std::min(t0, ts);
    } else if (ph == "C") {
      const double ts = number_field(e, "ts", i, label, true);
      auto name = e.find("name");
      if (name == e.end() || !name->is_string()) fail(label, "event " + std::to_string(i) + " has no string \"name\"");
      t0 = std::min(t0, ts);
      const std::string n = name->get<std::string>();
      if (n.rfind("cpu ", 0) != 0 || n.size() == 4) continue;  // other counters: not utilization
      auto args = e.find("args");
      if (args == e.end() || !args->is_object()) fail(label, "event " + std::to_string(i) + " has no \"args\" object");
      // Trace writes {"value": v}; other writers may name the series otherwise:
      // take "value", else the first number.
      const json* v = nullptr;
      if (auto it = args->find("value"); it != args->end()) v = &*it;
      for (auto it = args->begin(); !v && it != args->end(); ++it)
        if (it->is_number()) v = &*it;
      if (!v || !v->is_number() || !std::isfinite(v->get<double>()))
        fail(label, "event " + std::to_string(i) + ": counter \"" + n + "\" has no numeric value");
      out.utilization.push_back(UtilizationSample{n.substr(4), ts, v->get<double>()});
    }
  }
  if (!std::isfinite(t0)) t0 = 0;
  for (Span& s : out.spans) {
    s.start = (s.start - t0) * 1e-6;
    s.duration *= 1e-6;
  }
  for (UtilizationSample& u : out.utilization) u.t = (u.t - t0) * 1e-6;
  std::stable_sort(out.spans.begin(), out.spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
  std::stable_sort(out.utilization.begin(), out.utilization.end(),
                   [](const UtilizationSample& a, const UtilizationSample& b) { return a.t < b.t; });
  return out;
}

}  // namespace

ParsedTrace parse_trace(const std::string& json_text, const std::string& label) {
  try {
    return parse_events(json_text, label);
  } catch (const nlohmann::json::exception& e) {
    // A shape the checks above did not foresee: still the file's fault.
    fail(label, e.what());
  }
}

}  // namespace stoke::doctor
