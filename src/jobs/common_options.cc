#include "jobs/common_options.h"

#include <algorithm>
#include <charconv>
#include <thread>

#include "core/error.h"

namespace stoke {

DeviceSpec parse_device(const std::string& text) {
  DeviceSpec spec;
  if (text == "auto") return spec;
  if (text == "cpu") {
    spec.kind = DeviceSpec::Kind::cpu;
    return spec;
  }
  if (text == "cuda") {
    spec.kind = DeviceSpec::Kind::cuda;
    return spec;
  }
  if (text.rfind("cuda:", 0) == 0) {
    const char* b = text.data() + 5;
    const char* e = text.data() + text.size();
    int index = -1;
    auto [end, ec] = std::from_chars(b, e, index);
    if (ec == std::errc() && end == e && b != e && index >= 0) {
      spec.kind = DeviceSpec::Kind::cuda;
      spec.index = index;
      spec.index_given = true;
      return spec;
    }
  }
  throw Error(Errc::invalid_argument, "--device \"" + text + "\": expected auto, cpu, cuda or cuda:N");
}

DeviceSpec::DeviceSpec(const std::string& text) { *this = parse_device(text); }

std::string DeviceSpec::text() const {
  switch (kind) {
    case Kind::automatic: return "auto";
    case Kind::cpu: return "cpu";
    case Kind::cuda: return index_given ? "cuda:" + std::to_string(index) : "cuda";
  }
  return "auto";
}

int max_workers() {
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::min(kWorkersPerCore * cores, kMaxWorkersAbsolute);
}

std::string max_workers_reason() {
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return "at most " + std::to_string(kWorkersPerCore) + " per core and " + std::to_string(kMaxWorkersAbsolute) +
         " in all; this machine has " + std::to_string(cores) + (cores == 1 ? " core" : " cores") +
         ", and more threads only contend";
}

void validate_common_options(const CommonOptions& o) {
  if (o.workers < 0 || o.workers > max_workers())
    throw Error(Errc::invalid_argument, "--workers " + std::to_string(o.workers) + ": expected 0 to " +
                                            std::to_string(max_workers()) + " (" + max_workers_reason() + ")");
  if (o.batch_tokens <= 0)
    throw Error(Errc::invalid_argument, "--batch-tokens " + std::to_string(o.batch_tokens) + ": expected > 0");
  if (o.max_length && *o.max_length <= 0)
    throw Error(Errc::invalid_argument, "--max-length " + std::to_string(*o.max_length) + ": expected > 0");
  if (o.text_field.empty()) throw Error(Errc::invalid_argument, "--text-field: expected a field name");
  if (!o.input_format.empty()) input_format_from_name(o.input_format);
}

void resolve_model_flag(CommonOptions& o) {
  if (o.model_location) return;
  ModelLocation loc = locate_model(o.model);
  o.model = loc.dir.string();
  o.model_location = std::move(loc);
}

RecordReaderOptions record_reader_options(const CommonOptions& o) {
  RecordReaderOptions r;
  r.path = o.input;
  if (!o.input_format.empty()) r.format = input_format_from_name(o.input_format);
  r.text_field = o.text_field;
  r.pair_field = o.pair_field;
  r.id_field = o.id_field;
  const InputFormat format = r.format ? *r.format : input_format_for_path(r.path);
  if (format == InputFormat::text && o.pair_field == CommonOptions().pair_field) r.pair_field.clear();
  return r;
}

int default_workers(const std::string& device_name) {
  if (device_name == "cpu") return 1;
  const unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return static_cast<int>(std::clamp(cores - 1, 1u, 8u));
}

}  // namespace stoke
