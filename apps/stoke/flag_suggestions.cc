#include "apps/stoke/flag_suggestions.h"

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>

namespace stoke::cli {

namespace {

// ---- the names other tools use -----------------------------------------------

// A flag to use instead, with the value it takes for this meaning ("--precision
// bf16" for the Trainer's --bf16) and what it means where two are offered.
struct Use {
  const char* flag;
  const char* value = "";
  const char* meaning = "";
};

struct KnownName {
  const char* typed;  // as normalized(): dashes, lower case
  // A word of the command's path the entry applies under ("tune" for `stoke
  // tune embed`); "" for every command. The first matching entry is taken, so
  // the narrow ones come first.
  const char* under;
  // Ways to say it, in order; the first that has a flag of the command is
  // shown, with every flag of it the command has (--batch-size means sequences
  // per batch to one reader and a token budget to another: both are named).
  std::vector<std::vector<Use>> choices;
  const char* note = "";   // said when no choice is a flag of the command
  // Then also name the commands that have it; false: the command leaves the
  // flag out on purpose and the note says why (it also wins over a near miss).
  bool say_where = true;
};

const Use kSequencesPerBatch{"--max-batch-size", "", "sequences per batch"};
const Use kTokensPerBatch{"--batch-tokens", "", "a token budget per batch"};
const char* kPoolingNote = "the model folder decides how it pools (1_Pooling/config.json)";

const std::vector<KnownName>& known_names() {
  static const std::vector<KnownName> table = {
      // Flags a command leaves out on purpose: why, rather than where else.
      {"--output", "tune", {}, "tune's trials write to temporary folders; give --output to the job you run with the "
                               "tuned --config", false},
      {"--device", "tokenize", {}, "tokenize runs no model", false},
      {"--precision", "tokenize", {}, "tokenize runs no model", false},
      {"--batch-tokens", "tokenize", {}, "tokenize forms no batches", false},
      {"--batch-size", "tokenize", {}, "tokenize forms no batches", false},
      {"--max-batch-size", "tokenize", {}, "tokenize forms no batches", false},
      {"--batch-tokens", "train", {{{"--batch-size", "", "examples per micro-batch"}}}},
      {"--pair-field", "embed", {}, "embed reads one text per record", false},
      {"--id-field", "train", {}, "train writes a model, not rows per record", false},
      {"--input", "serve", {}, "serve's texts come in requests", false},
      {"--input-format", "serve", {}, "serve's texts come in requests", false},
      {"--text-field", "serve", {}, "serve's texts come in requests", false},
      {"--model", "inspect", {}, "it takes the model as its argument: `stoke inspect PATH`", false},
      {"--model-id", "inspect", {}, "it takes the model as its argument: `stoke inspect PATH`", false},
      // sentence-transformers (encode() and the model's settings)
      {"--batch-size", "", {{kSequencesPerBatch, kTokensPerBatch}}},
      {"--max-seq-length", "", {{{"--max-length"}}}},
      {"--normalize-embeddings", "", {{{"--normalize"}}}},
      {"--truncate-dim", "", {{{"--dimensions"}}}},
      {"--pooling-mode", "", {{{"--pooling"}}}, kPoolingNote},
      {"--pooling-strategy", "", {{{"--pooling"}}}, kPoolingNote},
      {"--pooling", "", {}, kPoolingNote},
      // TEI (text-embeddings-router)
      {"--model-id", "", {{{"--model"}}}},
      {"--hostname", "", {{{"--host"}}}},
      {"--max-batch-tokens", "", {{{"--batch-tokens"}}}},
      {"--max-client-batch-size", "", {}, "it limits the texts of one request"},
      {"--tokenization-workers", "", {{{"--workers"}}}},
      {"--dtype", "", {{{"--precision", "", "what the model computes in"}, {"--output-dtype", "", "what the .npy files hold"}}}},
      {"--auto-truncate", "", {{{"--max-length", "", "texts are cut at it"}}}},
      {"--truncate", "", {{{"--auto-truncate"}}, {{"--max-length", "", "texts are cut at it"}}}},
      // FlagEmbedding / PyLate / SparseEncoder (sparse and multi-vector models)
      {"--colbert-role", "", {{{"--role"}}}},
      {"--is-query", "", {{{"--role", "query"}}}},
      {"--max-active-dims", "", {{{"--sparse-top-k"}}}},
      {"--return-sparse", "", {{{"--outputs", "dense,sparse,colbert"}}}},
      {"--return-colbert-vecs", "", {{{"--outputs", "dense,sparse,colbert"}}}},
      // British spelling
      {"--normalise", "", {{{"--normalize"}}}},
      {"--no-normalise", "", {{{"--no-normalize"}}}},
      // Hugging Face: transformers' Trainer and its example scripts
      {"--model-name-or-path", "", {{{"--model"}}}},
      {"--model-name", "", {{{"--model"}}}},
      {"--model-path", "", {{{"--model"}}}},
      {"--torch-dtype", "", {{{"--precision"}}}},
      {"--fp16", "", {{{"--precision", "f16"}}}},
      {"--bf16", "", {{{"--precision", "bf16"}}}},
      {"--int8", "", {{{"--precision", "int8"}}}},
      {"--max-len", "", {{{"--max-length"}}}},
      {"--max-seq-len", "", {{{"--max-length"}}}},
      {"--model-max-length", "", {{{"--max-length"}}}},
      {"--output-dir", "", {{{"--output"}}}},
      {"--output-path", "", {{{"--output"}}}},
      {"--output-folder", "", {{{"--output"}}}},
      {"--num-train-epochs", "", {{{"--epochs"}}}},
      {"--num-epochs", "", {{{"--epochs"}}}},
      {"--learning-rate", "", {{{"--lr"}}}},
      {"--per-device-train-batch-size", "", {{{"--batch-size"}}, {kSequencesPerBatch, kTokensPerBatch}}},
      {"--train-batch-size", "", {{{"--batch-size"}}, {kSequencesPerBatch, kTokensPerBatch}}},
      {"--gradient-accumulation-steps", "", {{{"--grad-accum"}}}},
      {"--gradient-accumulation", "", {{{"--grad-accum"}}}},
      {"--warmup", "", {{{"--warmup-steps", "", "steps"}, {"--warmup-ratio", "", "a share of all steps"}}}},
      {"--lr-scheduler-type", "", {{{"--schedule"}}}},
      {"--lr-scheduler", "", {{{"--schedule"}}}},
      {"--logging-steps", "", {{{"--log-every"}}}},
      {"--save-steps", "", {{{"--save-every"}}}},
      {"--eval-steps", "", {{{"--eval-every"}}}},
      {"--evaluation-strategy", "", {{{"--eval-strategy"}}}},
      {"--load-best-model-at-end", "", {{{"--load-best"}}}},
      {"--metric-for-best-model", "", {{{"--metric"}}}},
      {"--label-smoothing-factor", "", {{{"--label-smoothing"}}}},
      {"--resume-from-checkpoint", "", {{{"--resume"}}}},
      {"--overwrite-output-dir", "", {{{"--overwrite"}}}},
      {"--train-file", "", {{{"--train"}}}},
      {"--validation-file", "", {{{"--eval"}}}},
      {"--eval-file", "", {{{"--eval"}}}},
      {"--input-file", "", {{{"--input"}}}},
      {"--text-column", "", {{{"--text-field"}}}},
      {"--label-column", "", {{{"--label-field"}}}},
      {"--id-column", "", {{{"--id-field"}}}},
      {"--no-cuda", "", {{{"--device", "cpu"}}}},
      {"--use-cpu", "", {{{"--device", "cpu"}}}},
      {"--cpu", "", {{{"--device", "cpu"}}}},
      {"--cuda", "", {{{"--device", "cuda"}}}},
      {"--gpu", "", {{{"--device", "cuda"}}}},
      {"--seed", "", {}, "nothing in it is random (the same input gives the same output)"},
      // PyTorch's DataLoader and thread settings
      {"--num-workers", "", {{{"--workers"}}}},
      {"--threads", "", {{{"--workers", "", "tokenizer threads"}, {"--io-threads", "", "threads reading requests"}}}},
      {"--num-threads", "", {{{"--workers", "", "tokenizer threads"}, {"--io-threads", "", "threads reading requests"}}}},
      {"--silent", "", {{{"--quiet"}}}},
      {"--no-progress", "", {{{"--quiet"}}}},
      {"--instruction", "", {{{"--prompt"}}}},
  };
  return table;
}

// ---- words -------------------------------------------------------------------

std::vector<std::string> words_of(const std::string& path) {
  std::vector<std::string> words;
  size_t at = 0;
  while (at < path.size()) {
    const size_t end = std::min(path.find(' ', at), path.size());
    if (end > at) words.push_back(path.substr(at, end - at));
    at = end + 1;
  }
  return words;
}

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const KnownName* find_known(const std::string& name, const std::string& command) {
  const std::vector<std::string> words = words_of(command);
  for (const KnownName& k : known_names())
    if (name == k.typed && (*k.under == '\0' || has(words, k.under))) return &k;
  return nullptr;
}

// The command's way of writing a flag: lower case, dashes inside, two in front
// (one for a single letter). "--Batch_Tokens" and "-batch-tokens" are
// --batch-tokens.
std::string normalized(const std::string& typed) {
  std::string bare = typed.substr(std::min(typed.find_first_not_of('-'), typed.size()));
  for (char& ch : bare) ch = ch == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (bare.empty()) return typed;
  return (bare.size() == 1 ? "-" : "--") + bare;
}

std::string bare(const std::string& name) { return name.substr(std::min(name.find_first_not_of('-'), name.size())); }

// "a", "a or b", "a, b or c" (with "and": the same).
std::string join(const std::vector<std::string>& items, const char* last) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += i + 1 == items.size() ? std::string(" ") + last + " " : std::string(", ");
    out += items[i];
  }
  return out;
}

std::string shown(const Use& u) {
  std::string s = u.flag;
  if (*u.value) s += std::string(" ") + u.value;
  if (*u.meaning) s += std::string(" (") + u.meaning + ")";
  return s;
}

// Optimal string alignment distance: insertions, deletions, substitutions
// and swapped neighbours ("lenght") each cost one.
size_t edit_distance(const std::string& a, const std::string& b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i)
    for (size_t j = 1; j <= m; ++j) {
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (a[i - 1] != b[j - 1])});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  return d[n][m];
}

// The commands other than `self` that take `flag`, as "`stoke train`": its
// own subcommands first (the flag was given before the job was named), else
// the commands of fewest words (`stoke train` before `stoke tune train`).
std::string commands_with(const std::string& flag, const std::string& self, const std::vector<CommandFlags>& others,
                          bool* under_self) {
  std::vector<const CommandFlags*> found;
  for (const CommandFlags& c : others)
    if (c.command != self && has(c.flags, flag)) found.push_back(&c);
  const std::string prefix = self + " ";
  *under_self = std::any_of(found.begin(), found.end(), [&](const CommandFlags* c) {
    return c->command.rfind(prefix, 0) == 0;
  });
  if (*under_self)
    found.erase(std::remove_if(found.begin(), found.end(),
                               [&](const CommandFlags* c) { return c->command.rfind(prefix, 0) != 0; }),
                found.end());
  size_t fewest = SIZE_MAX;
  for (const CommandFlags* c : found) fewest = std::min(fewest, words_of(c->command).size());
  std::vector<std::string> names;
  for (const CommandFlags* c : found)
    if (words_of(c->command).size() == fewest) names.push_back("`" + c->command + "`");
  return join(names, "and");
}

}  // namespace

std::vector<std::string> close_names(const std::string& typed, const std::vector<std::string>& names) {
  const std::string t = bare(typed);
  // Cut short inside a word: "--dim", "--norm". A whole word ("--output")
  // that begins a longer flag ("--output-dtype") is another setting.
  if (t.size() >= 3) {
    std::vector<std::string> begun;
    for (const std::string& n : names) {
      const std::string b = bare(n);
      if (b.size() > t.size() && b.compare(0, t.size(), t) == 0 && b[t.size()] != '-') begun.push_back(n);
    }
    if (!begun.empty() && begun.size() <= 3) return begun;
  }
  // One slip in a short name, more in a long one; none in two or three letters
  // ("--lr" is no typo of "--id").
  const size_t limit = t.size() <= 3 ? 0 : t.size() <= 5 ? 1 : t.size() <= 11 ? 2 : 3;
  size_t best = limit + 1;
  std::vector<std::string> nearest;
  for (const std::string& n : names) {
    const std::string b = bare(n);
    if (b.size() < 2) continue;  // -h
    const size_t d = edit_distance(t, b);
    if (d == 0 || d > limit) continue;
    if (d < best) {
      best = d;
      nearest.clear();
    }
    if (d == best && nearest.size() < 3) nearest.push_back(n);
  }
  return nearest;
}

std::string unknown_flag_message(const CommandFlags& command, const std::string& token,
                                 const std::vector<CommandFlags>& others) {
  const std::string typed = token.substr(0, token.find('='));
  const std::string head = "unknown flag " + typed + " for `" + command.command + "`";
  const std::string name = normalized(typed);
  if (name != typed && has(command.flags, name)) return head + ": it is spelled " + name;

  const KnownName* known = find_known(name, command.command);
  if (known != nullptr)
    for (const std::vector<Use>& choice : known->choices) {
      std::vector<std::string> here;
      for (const Use& u : choice)
        if (has(command.flags, u.flag)) here.push_back(shown(u));
      if (!here.empty()) return head + ": use " + join(here, "or");
    }

  // A flag the command leaves out on purpose: the reason, not a near miss
  // (`stoke embed --pair-field` is not a slip of --id-field).
  if (known != nullptr && !known->say_where) return head + ": " + known->note;

  if (const std::vector<std::string> close = close_names(name, command.flags); !close.empty())
    return head + ": did you mean " + join(close, "or") + "?";

  // Where it is a flag after all: under another command, or under its stoke name.
  bool under_self = false;
  std::string where;
  if (const std::string w = commands_with(name, command.command, others, &under_self); !w.empty()) {
    where = name + " is a flag of " + w;
  } else if (known != nullptr) {
    for (const std::vector<Use>& choice : known->choices) {
      for (const Use& u : choice)
        if (const std::string w = commands_with(u.flag, command.command, others, &under_self); !w.empty()) {
          where = "stoke calls it " + shown(u) + ", a flag of " + w;
          break;
        }
      if (!where.empty()) break;
    }
  }
  if (!where.empty() && under_self) where += " (name the command before its flags)";
  std::string said = known != nullptr ? known->note : "";
  if (!where.empty()) said += (said.empty() ? "" : "; ") + where;
  if (!said.empty()) return head + ": " + said;
  return head + " (`" + command.command + " --help` lists its flags)";
}

std::string unknown_command_message(const std::string& command, const std::vector<std::string>& subcommands,
                                    const std::string& token) {
  if (token.empty()) return "`" + command + "` needs a command: " + join(subcommands, "or");
  const std::string head = "unknown command \"" + token + "\" for `" + command + "`";
  std::vector<std::string> close = close_names(token, subcommands);
  if (close.empty()) return head + ": expected " + join(subcommands, "or");
  for (std::string& c : close) c = "`" + command + " " + c + "`";
  return head + ": did you mean " + join(close, "or") + "?";
}

std::string unexpected_argument_message(const std::string& command, const std::string& token) {
  return "unexpected argument \"" + token + "\" for `" + command + "` (`" + command + " --help` says what it takes)";
}

}  // namespace stoke::cli
