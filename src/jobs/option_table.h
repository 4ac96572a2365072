// A job's options, declared once: each entry is a flag's name, what values it
// takes (a number in a range, a word from a list, any text, present or not),
// its default as shown, its help, and where it is offered. The CLI (with
// `--config FILE`, whose keys are flags), `stoke tune`'s settings and the
// Python package read a job's options through its table, so a flag is spelled
// and parsed in one place, early, into the typed field of the job's options
// struct. Adding a flag to a job is one entry (docs/ops.md's counterpart for
// options: docs/options.md).
//
// Values arrive as text (the command line, a config file's value, a Python
// argument turned into text by python/ext) and are checked as they are set:
// a number as a signed value against its range, a word against its list, and
// a bad one is refused with one line naming flag, value and what is accepted
// ("--batch-tokens -2: expected 1 to 16777216"), as Error(invalid_argument).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/error.h"

namespace stoke {

enum class OptionKind {
  flag,     // present or not (the CLI: no value; Python: True/False)
  integer,  // a whole number in [lo, hi]
  real,     // a number in its range
  word,     // one of `choices`
  text,     // any text (a path, a field name, a prompt)
  list,     // one or more texts (the CLI: the flag repeated or several values)
};

// Where an option is offered: the CLI (and so --config) and the Python job
// functions. Options every job shares carry the mask of the jobs using them.
enum OptionOffer : unsigned { kOfferCli = 1u, kOfferPython = 2u, kOfferBoth = 3u };

template <class Options>
struct Option {
  std::string flag;            // "--batch-tokens"
  OptionKind kind = OptionKind::text;
  std::string help;            // one line; the accepted values are appended (accepted())
  std::string accepted;        // "1 to 16777216", "cls, mean, max", "" (any text)
  unsigned offer = kOfferBoth;
  unsigned uses = ~0u;         // a shared option: the jobs (bits of their own mask) that take it...
  unsigned unless = 0;         // ... except those whose mask has one of these bits
  std::string type_name;       // what --help shows for the value: INT, NUMBER, TEXT, "INT|auto"
  std::vector<std::string> aliases;  // other names of the flag on the CLI ("--input" for train's --train)
  bool value_optional = false;       // the CLI flag may come without a value (train's --resume [CHECKPOINT])
  std::function<void(Options&, const std::string&)> set;  // text -> the typed field, checked
  std::function<std::string(const Options&)> show;        // the value as text ("" = no default shown)
  // A flag's state (kind flag): whether the options say it was given. A
  // manifest records the run's options with it and show (embed's --resume).
  std::function<bool(const Options&)> given;

  // "batch_tokens": the Python keyword.
  std::string python_name() const {
    std::string n = flag.substr(flag.rfind('-', 1) == 1 ? 2 : 0);
    for (char& c : n)
      if (c == '-') c = '_';
    return n;
  }
};

template <class Options>
using OptionTable = std::vector<Option<Options>>;

// An option of a part of the options (CommonOptions inside EmbedOptions)
// lifted to the whole: the same entry, its field reached through `part`.
template <class Whole, class Part, class Get>
Option<Whole> lift_option(const Option<Part>& o, Get part) {
  Option<Whole> w;
  w.flag = o.flag;
  w.kind = o.kind;
  w.help = o.help;
  w.accepted = o.accepted;
  w.offer = o.offer;
  w.uses = o.uses;
  w.unless = o.unless;
  w.type_name = o.type_name;
  w.aliases = o.aliases;
  w.value_optional = o.value_optional;
  auto set = o.set;
  auto show = o.show;
  w.set = [set, part](Whole& whole, const std::string& text) { set(part(whole), text); };
  if (o.given) {
    auto given = o.given;
    w.given = [given, part](const Whole& whole) { return given(part(const_cast<Whole&>(whole))); };
  }
  if (show) w.show = [show, part](const Whole& whole) { return show(part(const_cast<Whole&>(whole))); };
  return w;
}

// The entry named `flag` ("--x" or the Python name "x"), or nullptr.
template <class Options>
const Option<Options>* find_option(const OptionTable<Options>& table, const std::string& name) {
  for (const Option<Options>& o : table)
    if (o.flag == name || o.python_name() == name) return &o;
  return nullptr;
}

// ---- values, checked (the one place each kind is parsed) ----------------------

// "-2" is minus two, never 2^64 - 2 (RELIABILITY 16). `why`, when not empty,
// is said after the range ("256 at most (4 per core: this machine has 2 cores)").
int64_t parse_int_option(const std::string& flag, const std::string& text, int64_t lo, int64_t hi,
                         const std::string& why = "");
// lo_open / hi_open: the value must lie strictly above lo / below hi.
double parse_real_option(const std::string& flag, const std::string& text, double lo, double hi,
                         bool lo_open = false, bool hi_open = false);
// One of `choices`, else "--on-error \"maybe\": expected stop or skip".
const std::string& parse_word_option(const std::string& flag, const std::string& text,
                                     const std::vector<std::string>& choices);
// "true"/"false" (and 1/0, yes/no) for a flag's value given in a config file.
bool parse_flag_option(const std::string& flag, const std::string& text);

std::string int_range_text(int64_t lo, int64_t hi);
std::string real_range_text(double lo, double hi, bool lo_open = false, bool hi_open = false);
std::string number_text(double v);  // %g

// ---- entries, made the same way everywhere -------------------------------------
// `field(options)` returns a reference to the field the option sets.

template <class O, class Field>
Option<O> int_option(std::string flag, Field field, int64_t lo, int64_t hi, std::string help, unsigned offer = kOfferBoth,
                     std::string why = "") {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::integer;
  o.help = std::move(help);
  o.accepted = int_range_text(lo, hi);
  o.offer = offer;
  o.type_name = "INT";
  const std::string f = o.flag;
  o.set = [field, f, lo, hi, why](O& opts, const std::string& text) {
    using T = std::remove_reference_t<decltype(field(opts))>;
    field(opts) = static_cast<T>(parse_int_option(f, text, lo, hi, why));
  };
  o.show = [field](const O& opts) {
    const auto& v = field(const_cast<O&>(opts));
    if constexpr (requires { v.has_value(); })
      return v ? std::to_string(*v) : std::string();  // unset: no default to show
    else
      return std::to_string(v);
  };
  return o;
}

template <class O, class Field>
Option<O> real_option(std::string flag, Field field, double lo, double hi, std::string help, unsigned offer = kOfferBoth,
                      bool lo_open = false, bool hi_open = false) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::real;
  o.help = std::move(help);
  o.accepted = real_range_text(lo, hi, lo_open, hi_open);
  o.offer = offer;
  o.type_name = "NUMBER";
  const std::string f = o.flag;
  o.set = [field, f, lo, hi, lo_open, hi_open](O& opts, const std::string& text) {
    field(opts) = parse_real_option(f, text, lo, hi, lo_open, hi_open);
  };
  o.show = [field](const O& opts) {
    const auto& v = field(const_cast<O&>(opts));
    if constexpr (requires { v.has_value(); })
      return v ? number_text(*v) : std::string();  // unset: no default to show
    else
      return number_text(v);
  };
  return o;
}

template <class O, class Field>
Option<O> word_option(std::string flag, Field field, std::vector<std::string> choices, std::string help,
                      unsigned offer = kOfferBoth) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::word;
  o.help = std::move(help);
  for (size_t i = 0; i < choices.size(); ++i) o.accepted += (i ? ", " : "") + choices[i];
  o.offer = offer;
  o.type_name = "TEXT";  // the help names the words
  const std::string f = o.flag;
  o.set = [field, f, choices](O& opts, const std::string& text) { field(opts) = parse_word_option(f, text, choices); };
  o.show = [field](const O& opts) { return field(const_cast<O&>(opts)); };
  return o;
}

// One of a list of words, each naming a value of an enum: the typed field
// holds the enum (an std::optional of it: unset until given), the table the
// words; "--schedule \"triangle\": expected linear, constant or cosine".
// E may be the optional itself when unset has a word of its own (serve's
// --model-kind auto: std::nullopt, the server decides from the folder).
template <class O, class E, class Field>
Option<O> enum_option(std::string flag, Field field, std::vector<std::pair<std::string, E>> words, std::string help,
                      unsigned offer = kOfferBoth) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::word;
  o.help = std::move(help);
  std::vector<std::string> choices;
  for (const auto& [w, e] : words) choices.push_back(w);
  for (size_t i = 0; i < choices.size(); ++i) o.accepted += (i ? ", " : "") + choices[i];
  o.offer = offer;
  o.type_name = "TEXT";  // the help names the words
  const std::string f = o.flag;
  o.set = [field, f, words, choices](O& opts, const std::string& text) {
    const std::string& w = parse_word_option(f, text, choices);
    for (const auto& [word, e] : words)
      if (word == w) field(opts) = e;
  };
  o.show = [field, words](const O& opts) {
    const auto& v = field(const_cast<O&>(opts));
    if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(v)>, E> && requires { v.has_value(); }) {
      if (!v) return std::string();  // unset: no default to show
      for (const auto& [word, e] : words)
        if (e == *v) return word;
    } else {  // the field holds E (unset too, when E is an optional with a word for it)
      for (const auto& [word, e] : words)
        if (e == v) return word;
    }
    return std::string();
  };
  return o;
}

// "8G", "512M", "1048576": bytes, K/M/G (and KB/KiB, ...) as powers of 1024;
// 1 byte to 4 EiB, else "--memory-budget \"8X\": unknown unit \"X\"".
int64_t parse_bytes_option(const std::string& flag, const std::string& text);

template <class O, class Field>
Option<O> text_option(std::string flag, Field field, std::string help, unsigned offer = kOfferBoth,
                      bool show_default = true) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::text;
  o.help = std::move(help);
  o.offer = offer;
  o.type_name = "TEXT";
  o.set = [field](O& opts, const std::string& text) { field(opts) = text; };
  if (show_default) o.show = [field](const O& opts) { return field(const_cast<O&>(opts)); };
  return o;
}

// A flag: set() with "true" (the CLI: the flag given) or "false".
template <class O, class Field>
Option<O> flag_option(std::string flag, Field field, std::string help, unsigned offer = kOfferBoth) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::flag;
  o.help = std::move(help);
  o.offer = offer;
  const std::string f = o.flag;
  o.set = [field, f](O& opts, const std::string& text) { field(opts) = parse_flag_option(f, text); };
  o.given = [field](const O& opts) { return field(const_cast<O&>(opts)) == true; };
  return o;
}

}  // namespace stoke
