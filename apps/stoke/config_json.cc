#include "apps/stoke/config_json.h"

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"

namespace stoke::cli {

using json = nlohmann::json;

void apply_config_file(CLI::App* cmd, const std::string& path) {
  if (path.empty()) return;
  const json doc = json::parse(read_file(path), nullptr, false);
  if (doc.is_discarded()) throw Error(Errc::format, path + ": not valid JSON (expected an object of flag: value)");
  if (!doc.is_object()) throw Error(Errc::format, path + ": expected a JSON object of flag: value");
  for (const auto& [key, value] : doc.items()) {
    const std::string flag = key.rfind("--", 0) == 0 ? key : "--" + key;
    CLI::Option* opt = flag == "--config" ? nullptr : cmd->get_option_no_throw(flag);
    if (opt == nullptr)
      throw Error(Errc::invalid_argument, path + ": \"" + key + "\" is not a flag of `stoke " + cmd->get_name() + "`");
    if (opt->count() > 0) continue;  // given on the command line: it wins
    std::string text;
    if (value.is_string())
      text = value.get<std::string>();
    else if (value.is_boolean())
      text = value.get<bool>() ? "true" : "false";
    else if (value.is_number())
      text = value.dump();
    else
      throw Error(Errc::format, path + ": \"" + key + "\": expected a string, number or boolean, found " + value.type_name());
    // A flag set to false is simply not given.
    if (opt->get_type_size() == 0 && text == "false") continue;
    try {
      opt->add_result(text);
      opt->run_callback();
    } catch (const CLI::Error& e) {
      throw Error(Errc::invalid_argument, path + ": \"" + key + "\": " + e.what());
    }
  }
}

}  // namespace stoke::cli
