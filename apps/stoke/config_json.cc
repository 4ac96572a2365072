#include "apps/stoke/config_json.h"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace stoke::cli {

using json = nlohmann::json;

namespace {

// Sets every flag of `doc` (flag: value) the command line did not give.
// `where` names the source in errors.
void apply_flag_values(CLI::App* cmd, const json& doc, const std::string& where) {
  for (const auto& [key, value] : doc.items()) {
    const std::string flag = key.rfind("--", 0) == 0 ? key : "--" + key;
    CLI::Option* opt = flag == "--config" ? nullptr : cmd->get_option_no_throw(flag);
    if (opt == nullptr)
      throw Error(Errc::invalid_argument, where + ": \"" + key + "\" is not a flag of `stoke " + cmd->get_name() + "`");
    if (opt->count() > 0) continue;  // given on the command line: it wins
    if (value.is_array()) {  // a list (embed's --input files)
      try {
        for (const json& v : value) opt->add_result(v.is_string() ? v.get<std::string>() : v.dump());
        opt->run_callback();
      } catch (const CLI::Error& e) {
        throw Error(Errc::invalid_argument, where + ": \"" + key + "\": " + e.what());
      }
      continue;
    }
    std::string text;
    if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_boolean())
      text = value.get<bool>() ? "true" : "false";
    else if (value.is_number())
      text = value.dump();
    else
      throw Error(Errc::format, where + ": \"" + key + "\": expected a string, number or boolean, found " + value.type_name());
    // A flag set to false is simply not given.
    if (opt->get_type_size() == 0 && text == "false") continue;
    try {
      opt->add_result(text);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw Error(Errc::invalid_argument, where + ": \"" + key + "\": " + e.what());
    }
  }
}

}  // namespace

void apply_config_file(CLI::App* cmd, const std::string& path) {
  if (path.empty()) return;
  const json doc = json::parse(read_file(path), nullptr, false);
  if (doc.is_discarded()) throw Error(Errc::format, path + ": not valid JSON (expected an object of flag: value)");
  if (!doc.is_object()) throw Error(Errc::format, path + ": expected a JSON object of flag: value");
  apply_flag_values(cmd, doc, path);
}

void apply_resume_manifest(CLI::App* cmd) {
  const CLI::Option* resume = cmd->get_option_no_throw("--resume");
  const CLI::Option* output = cmd->get_option_no_throw("--output");
  if (!resume || !output || resume->count() == 0 || output->count() == 0) return;
  const std::filesystem::path manifest = std::filesystem::path(output->as<std::string>()) / "manifest.json";
  std::error_code ec;
  if (!std::filesystem::is_regular_file(manifest, ec)) return;
  const json doc = json::parse(read_file(manifest), nullptr, false);
  if (!doc.is_object() || doc.value("format", "") != "stoke-embeddings" || !doc.contains("options") ||
      !doc["options"].is_object())
    return;  // the job's own checks say what is wrong with it
  apply_flag_values(cmd, doc["options"], manifest.string() + " (its recorded settings)");
}

}  // namespace stoke::cli
