// `stoke embed`'s options (jobs/embed_job.h embed_option_table): the common
// options embed takes, then its own.
#include "jobs/embed_job.h"

#include <algorithm>

#include "core/error.h"

namespace stoke {

namespace {

using O = EmbedOptions;

// Task counts past any scheduler's (RELIABILITY 16: a number from a user is bounded).
constexpr int64_t kMaxTasks = 1'000'000;

// --outputs: a comma-separated subset of dense, sparse, colbert.
Option<O> outputs_option() {
  Option<O> o;
  o.flag = "--outputs";
  o.kind = OptionKind::text;
  o.help = "What each row gives, from one forward pass: any of dense (the sentence vector), sparse (bge-m3's "
           "lexical weights, CSR shards) and colbert (its multi-vectors, ragged shards), comma-separated";
  o.accepted = "a comma-separated subset of dense, sparse, colbert";
  o.type_name = "LIST";
  o.set = [](O& opts, const std::string& text) {
    O::Outputs out;
    out.dense = false;
    size_t begin = 0;
    while (begin <= text.size()) {
      const size_t end = std::min(text.find(',', begin), text.size());
      const std::string word = text.substr(begin, end - begin);
      if (word == "dense") {
        out.dense = true;
      } else if (word == "sparse") {
        out.sparse = true;
      } else if (word == "colbert") {
        out.colbert = true;
      } else {
        throw Error(Errc::invalid_argument, "--outputs " + text + ": \"" + word +
                                                "\" is not one of dense, sparse, colbert (comma-separated)");
      }
      begin = end + 1;
    }
    out.given = true;
    opts.outputs = out;
  };
  o.show = [](const O& opts) {
    std::string s;
    for (const auto& [on, name] : {std::pair{opts.outputs.dense, "dense"}, std::pair{opts.outputs.sparse, "sparse"},
                                   std::pair{opts.outputs.colbert, "colbert"}})
      if (on) s += (s.empty() ? "" : ",") + std::string(name);
    return s;
  };
  return o;
}

// --shard-index / --num-shards: a number, or auto (from the scheduler's environment).
Option<O> task_option(std::string flag, int64_t lo, int64_t hi, uint64_t O::*value, bool O::*automatic, std::string help) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::text;
  o.help = std::move(help);
  o.accepted = int_range_text(lo, hi) + ", or auto";
  o.type_name = "INT|auto";
  const std::string f = o.flag;
  o.set = [f, lo, hi, value, automatic](O& opts, const std::string& text) {
    opts.*automatic = text == "auto";
    if (!(opts.*automatic)) opts.*value = static_cast<uint64_t>(parse_int_option(f, text, lo, hi, "or auto"));
  };
  o.show = [value](const O& opts) { return std::to_string(opts.*value); };
  return o;
}

OptionTable<O> make_table() {
  OptionTable<O> t;
  for (const Option<CommonOptions>& c : common_option_table())
    if (job_takes(c, kEmbedFlags)) t.push_back(lift_option<O>(c, [](O& o) -> CommonOptions& { return o.common; }));
  auto add = [&t](Option<O> o, unsigned uses = ~0u) {
    o.uses = uses;
    t.push_back(std::move(o));
  };
  // The output folder's options: under `stoke embed` and `stoke doctor embed`, not `stoke tune embed`.
  add(text_option<O>("--output", [](O& o) -> std::string& { return o.output; },
                     "Output folder (manifest.json, embeddings-NNNNN.npy, ids-NNNNN.jsonl); required", kOfferCli, false),
      kEmbedOutputOptions);
  add(flag_option<O>("--overwrite", [](O& o) -> bool& { return o.overwrite; }, "Replace output already in the folder"),
      kEmbedOutputOptions);
  add(flag_option<O>("--resume", [](O& o) -> bool& { return o.resume; },
                     "Continue the job whose manifest is in the output folder (a fresh start when there is none; "
                     "needs a regular --input file)"),
      kEmbedOutputOptions);
  // `stoke tune embed` has its own (the gate of its int8 trial).
  add(real_option<O>("--min-centered-cosine", [](O& o) -> double& { return o.min_centered_cosine; }, -1, 1,
                     "--precision int8 measures itself against f32 on the first texts and warns below this mean "
                     "cosine (after removing the mean vector)"),
      kEmbedOutputOptions);
  add(text_option<O>("--pooling", [](O& o) -> std::string& { return o.pooling; },
                     "cls, mean, max, mean_sqrt_len or lasttoken (default: the model's sentence-transformers pooling, "
                     "else mean)",
                     kOfferBoth, false));
  {
    // Python: normalize=True / False; the CLI: two flags, one excluding the other.
    Option<O> n = flag_option<O>("--normalize", [](O& o) -> std::optional<bool>& { return o.normalize; },
                                 "L2-normalize the vectors (default: as the model's modules.json says)");
    n.set = [](O& o, const std::string& text) { o.normalize = parse_flag_option("--normalize", text); };
    add(std::move(n));
    Option<O> no = flag_option<O>("--no-normalize", [](O& o) -> std::optional<bool>& { return o.normalize; },
                                  "Do not normalize", kOfferCli);
    no.set = [](O& o, const std::string& text) {
      if (parse_flag_option("--no-normalize", text)) o.normalize = false;
    };
    no.given = [](const O& o) { return o.normalize == false; };
    add(std::move(no));
  }
  add(int_option<O>("--dimensions", [](O& o) -> int64_t& { return o.dimensions; }, 0, 1 << 20,
                    "Keep the first D dimensions after normalizing (Matryoshka; 0: all)"));
  add(text_option<O>("--prompt", [](O& o) -> std::string& { return o.prompt; },
                     "Text put before every input (e.g. \"query: \")", kOfferBoth, false));
  add(text_option<O>("--prompt-name", [](O& o) -> std::string& { return o.prompt_name; },
                     "A prompt by name from config_sentence_transformers.json", kOfferBoth, false));
  add(enum_option<O, DType>("--output-dtype", [](O& o) -> DType& { return o.output_dtype; },
                            {{"f32", DType::f32}, {"f16", DType::f16}}, "f32 or f16 (.npy element type)"));
  add(int_option<O>("--max-batch-size", [](O& o) -> int64_t& { return o.max_batch_size; }, 1, 1 << 20,
                    "Sequences per batch at most"));
  add(enum_option<O, bool>("--on-error", [](O& o) -> bool& { return o.skip_bad_records; },
                           {{"stop", false}, {"skip", true}},
                           "A bad record (invalid JSON/CSV, missing or non-string text): stop, or skip it into "
                           "OUT_DIR/errors.jsonl"));
  add(int_option<O>("--sort-window", [](O& o) -> uint64_t& { return o.sort_window; }, 1, 1 << 24,
                    "Records sorted by length together (memory vs padding-free batches)"));
  add(int_option<O>("--shard-size", [](O& o) -> uint64_t& { return o.shard_size; }, 1, 100'000'000,
                    "Rows per embeddings-NNNNN.npy shard (the unit of a commit)"));
  add(task_option("--shard-index", 0, kMaxTasks - 1, &O::shard_index, &O::shard_index_auto,
                  "This task's index i, below --num-shards: it embeds records r with r mod N == i; auto (with "
                  "--num-shards auto): from a Slurm job array (SLURM_ARRAY_TASK_ID - SLURM_ARRAY_TASK_MIN) or a "
                  "Kubernetes indexed Job (JOB_COMPLETION_INDEX) (0 to " +
                      std::to_string(kMaxTasks - 1) + ", or auto)"));
  add(task_option("--num-shards", 1, kMaxTasks, &O::num_shards, &O::num_shards_auto,
                  "Number of tasks N the input is split into (job arrays); auto (with --shard-index auto): "
                  "SLURM_ARRAY_TASK_COUNT, or STOKE_NUM_TASKS in a Kubernetes indexed Job (1 to " +
                      std::to_string(kMaxTasks) + ", or auto)"));
  add(enum_option<O, bool>("--partition", [](O& o) -> bool& { return o.partition_files; },
                           {{"records", false}, {"files", true}},
                     "How --num-shards splits the input: records (record r to task r mod N; every task reads the "
                     "whole input) or files (input file f, in sorted order, to task f mod N; a task reads only its "
                     "files)"));
  add(outputs_option());
  add(enum_option<O, TextRole>("--role", [](O& o) -> TextRole& { return o.role; },
                               {{"document", TextRole::document}, {"query", TextRole::query}},
                               "Which side of retrieval the texts are on: a ColBERT model prefixes and expands "
                               "queries (query) and drops punctuation from documents (document)"));
  add(int_option<O>("--sparse-top-k", [](O& o) -> int64_t& { return o.sparse_top_k; }, 0, 1 << 24,
                    "Keep each row's K largest sparse weights, the others dropped (sentence-transformers' "
                    "max_active_dims; ties keep the lower token id); 0: all"));
  // Long documents (docs/pipeline.md): identity fields of the manifest's "chunking".
  add(int_option<O>("--chunk-tokens", [](O& o) -> int64_t& { return o.chunks.settings.tokens; }, 0, 1 << 20,
                    "Cut each text's tokens into chunks of at most N, each a row with its span (0: one row per "
                    "record, truncated at the max length)"));
  add(int_option<O>("--chunk-overlap", [](O& o) -> int64_t& { return o.chunks.settings.overlap; }, 0, 1 << 20,
                    "Tokens two neighbouring chunks share (below --chunk-tokens)"));
  add(enum_option<O, ChunkBoundary>("--chunk-boundary", [](O& o) -> ChunkBoundary& { return o.chunks.settings.boundary; },
                                    {{"none", ChunkBoundary::none},
                                     {"word", ChunkBoundary::word},
                                     {"sentence", ChunkBoundary::sentence},
                                     {"paragraph", ChunkBoundary::paragraph}},
                                    "Move each cut back to the last word, sentence or paragraph end inside the chunk "
                                    "when there is one"));
  add(flag_option<O>("--late-chunking", [](O& o) -> bool& { return o.chunks.late; },
                     "Run each document whole and pool each chunk's tokens from that one pass, so every chunk sees "
                     "its context (encoders; needs --chunk-tokens)"));
  add(enum_option<O, ChunkPooling>("--pool-chunks", [](O& o) -> ChunkPooling& { return o.chunks.pool; },
                                   {{"none", ChunkPooling::none}, {"mean", ChunkPooling::mean}, {"max", ChunkPooling::max}},
                                   "One row per record instead: its chunks' rows pooled, then normalized as the "
                                   "model's are (needs --chunk-tokens)"));
  add(flag_option<O>("--serial", [](O& o) -> bool& { return o.serial; },
                     "Run the stages one after another (read, tokenize, compute, write): the loop the pipeline "
                     "replaces, for comparison",
                     kOfferCli));
  add(flag_option<O>("--debug-sync-each-batch", [](O& o) -> bool& { return o.debug_sync_each_batch; },
                     "Debugging: wait for the device after every batch (the mistake `stoke doctor` diagnoses)",
                     kOfferCli));
  return t;
}

}  // namespace

const OptionTable<EmbedOptions>& embed_option_table() {
  static const OptionTable<EmbedOptions> table = make_table();
  return table;
}

}  // namespace stoke
