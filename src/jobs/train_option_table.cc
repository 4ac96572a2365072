// `stoke train`'s options (jobs/train_job.h train_option_table): the common
// options train takes, then its own.
#include "jobs/train_job.h"

#include <cstdint>

namespace stoke {

namespace {

using O = TrainOptions;

// An enum's words as train/ spells them (schedule_name, ...): one spelling.
template <class E>
std::vector<std::pair<std::string, E>> named(std::initializer_list<E> values, const char* (*name)(E)) {
  std::vector<std::pair<std::string, E>> words;
  for (E e : values) words.emplace_back(name(e), e);
  return words;
}

// A comma-separated list flag (CLI and --config): set() gets the items.
Option<O> list_option(std::string flag, std::string help,
                      void (*set)(O&, const std::vector<std::string>&)) {
  Option<O> o;
  o.flag = std::move(flag);
  o.kind = OptionKind::text;
  o.help = std::move(help);
  o.offer = kOfferCli;
  o.type_name = "LIST";
  o.set = [set](O& opts, const std::string& text) {
    std::vector<std::string> items;
    size_t at = 0;
    while (at <= text.size()) {
      const size_t end = std::min(text.find(',', at), text.size());
      items.push_back(text.substr(at, end - at));
      at = end + 1;
    }
    set(opts, items);
  };
  return o;
}

OptionTable<O> make_table() {
  OptionTable<O> t;
  for (const Option<CommonOptions>& c : common_option_table())
    if (job_takes(c, kTrainFlags)) t.push_back(lift_option<O>(c, [](O& o) -> CommonOptions& { return o.common; }));
  auto add = [&t](Option<O> o, unsigned uses = ~0u) {
    o.uses = uses;
    t.push_back(std::move(o));
  };
  auto unset_default = [](Option<O> o) {  // a default that says "unset" in words instead
    o.show = nullptr;
    return o;
  };
  {
    Option<O> train = text_option<O>("--train", [](O& o) -> std::string& { return o.train; },
                                     "Training data: JSONL or CSV with text, optional text_pair, and label (embedding objectives: their columns); required",
                                     kOfferCli, false);
    train.aliases = {"--input"};
    add(std::move(train));
  }
  add(text_option<O>("--eval", [](O& o) -> std::string& { return o.eval; },
                     "Evaluation data, same form (loss, accuracy, macro-F1); embedding objectives: a BEIR folder, scored pairs or held-out pairs", kOfferCli, false));
  // The output folder's options: under `stoke train` and `stoke doctor train`, not `stoke tune train`.
  add(text_option<O>("--output", [](O& o) -> std::string& { return o.output; },
                     "Output folder: checkpoint-STEP/, the final model, log.jsonl, run.json; required", kOfferCli, false),
      kTrainOutputOptions);
  {
    Option<O> resume;
    resume.flag = "--resume";
    resume.kind = OptionKind::text;
    resume.value_optional = true;
    resume.help = "Continue from CHECKPOINT, or from the newest valid one in --output";
    resume.offer = kOfferCli;
    resume.type_name = "TEXT";
    resume.set = [](O& o, const std::string& text) {
      o.resume = true;
      o.resume_from = text;
    };
    add(std::move(resume), kTrainOutputOptions);
  }
  add(flag_option<O>("--overwrite", [](O& o) -> bool& { return o.overwrite; }, "Replace a training run already in --output",
                     kOfferCli),
      kTrainOutputOptions);
  add(enum_option<O, train::Objective>(
      "--objective", [](O& o) -> train::Objective& { return o.objective; },
      named<train::Objective>({train::Objective::classify, train::Objective::mnrl, train::Objective::mnrl_symmetric,
                               train::Objective::cosent, train::Objective::cosine_mse},
                              train::objective_name),
      "classify (a sequence classifier); or an embedding model: mnrl, mnrl-symmetric (anchor, positive[, negative...]),"
      " cosent, cosine-mse (sentence1, sentence2, score)",
      kOfferCli));
  add(unset_default(text_option<O>("--anchor-field", [](O& o) -> std::string& { return o.columns.anchor; },
                                   "Embedding objectives: the anchor column (default anchor, or sentence1 for scored pairs)",
                                   kOfferCli)));
  add(unset_default(text_option<O>("--positive-field", [](O& o) -> std::string& { return o.columns.positive; },
                                   "Embedding objectives: the positive column (default positive, or sentence2)",
                                   kOfferCli)));
  add(unset_default(list_option("--negative-fields",
                                "mnrl kinds: the hard-negative columns, comma-separated (default: every column named "
                                "negative*)",
                                [](O& o, const std::vector<std::string>& names) {
                                  std::vector<std::string> kept;
                                  for (const std::string& n : names)
                                    if (!n.empty()) kept.push_back(n);
                                  o.columns.negatives = kept;
                                })));
  add(unset_default(text_option<O>("--score-field", [](O& o) -> std::string& { return o.columns.score; },
                                   "cosent, cosine-mse: the pair's score column (default score)", kOfferCli)));
  add(real_option<O>("--scale", [](O& o) -> double& { return o.scale; }, 1e-6, 1e6,
                     "mnrl kinds, cosent: similarities x scale (1 / temperature)", kOfferCli, true));
  add(enum_option<O, bool>("--similarity", [](O& o) -> bool& { return o.dot_similarity; },
                           {{"cosine", false}, {"dot", true}}, "mnrl kinds: cosine or dot", kOfferCli));
  add(unset_default(list_option(
      "--matryoshka-dims",
      "Embedding objectives: the loss summed over these prefixes of the embedding (MatryoshkaLoss), e.g. 768,512,256",
      [](O& o, const std::vector<std::string>& items) {
        o.matryoshka_dims.clear();
        for (const std::string& d : items)
          o.matryoshka_dims.push_back(
              parse_int_option("--matryoshka-dims", d, 1, 1 << 20, "(comma-separated dimensions)"));
      })));
  add(unset_default(list_option("--matryoshka-weights",
                                "The weight of each --matryoshka-dims prefix's loss (default: 1 each)",
                                [](O& o, const std::vector<std::string>& items) {
                                  o.matryoshka_weights.clear();
                                  for (const std::string& w : items)
                                    o.matryoshka_weights.push_back(parse_real_option("--matryoshka-weights", w, 0, 1e6));
                                })));
  add(unset_default(int_option<O>("--mini-batch-tokens", [](O& o) -> int64_t& { return o.mini_batch_tokens; }, 1,
                                  int64_t{1} << 40,
                                  "Embedding objectives: at most this many tokens in memory at once; a larger "
                                  "--batch-size runs as GradCache mini-batches (default: the whole batch when the "
                                  "device has room)",
                                  kOfferCli)));
  add(text_option<O>("--label-field", [](O& o) -> std::string& { return o.label_field; },
                     "Field holding the label (integer id, name, or number for regression)", kOfferCli));
  add(int_option<O>("--epochs", [](O& o) -> int64_t& { return o.epochs; }, 1, 1'000'000, "Passes over the training data",
                    kOfferCli));
  add(unset_default(int_option<O>("--max-steps", [](O& o) -> int64_t& { return o.max_steps; }, 1, kMaxSteps,
                                  "Optimizer steps in all, instead of --epochs (default: unset, --epochs decides)",
                                  kOfferCli)));
  {
    Option<O> b;
    b.flag = "--batch-size";
    b.kind = OptionKind::text;
    b.help = "Examples per micro-batch, or auto (largest that fits --memory-budget); 1 to 1048576 or auto";
    b.accepted = "1 to 1048576, or auto";
    b.offer = kOfferCli;
    b.type_name = "TEXT";
    b.set = [](O& o, const std::string& text) {
      o.batch_size_auto = text == "auto";
      if (!o.batch_size_auto) o.batch_size = parse_int_option("--batch-size", text, 1, 1 << 20, "or auto");
    };
    b.show = [](const O& o) { return o.batch_size_auto ? std::string("auto") : std::to_string(o.batch_size); };
    add(std::move(b));
  }
  add(int_option<O>("--max-batch-size", [](O& o) -> int64_t& { return o.max_batch_size; }, 1, 1 << 20,
                    "Largest batch --batch-size auto tries", kOfferCli));
  {
    Option<O> m;
    m.flag = "--memory-budget";
    m.kind = OptionKind::text;
    m.help = "Memory --batch-size auto may plan for, e.g. 8G (default: 80% of what the device says is free)";
    m.accepted = "bytes, or with K, M or G";
    m.offer = kOfferCli;
    m.type_name = "TEXT";
    m.set = [](O& o, const std::string& text) { o.memory_budget = parse_bytes_option("--memory-budget", text); };
    add(std::move(m));
  }
  add(int_option<O>("--grad-accum", [](O& o) -> int64_t& { return o.grad_accum; }, 1, 1 << 16,
                    "Micro-batches per optimizer step", kOfferCli));
  add(int_option<O>("--bucket-mb", [](O& o) -> int64_t& { return o.bucket_mb; }, 1, 1 << 16,
                    "Data-parallel runs (mpirun/srun): MiB of gradients per all-reduce bucket", kOfferCli));
  add(int_option<O>("--comm-timeout", [](O& o) -> int64_t& { return o.comm_timeout; }, 1, 1 << 20,
                    "Data-parallel runs on CUDA: seconds an NCCL all-reduce may take before the job is aborted",
                    kOfferCli));
  add(real_option<O>("--lr", [](O& o) -> double& { return o.lr; }, 0, 10, "Peak learning rate (before --lr-scale-from)",
                     kOfferCli, true));
  add(int_option<O>("--lr-scale-from", [](O& o) -> int64_t& { return o.lr_scale_from; }, 0, 1 << 24,
                    "Scale --lr by effective batch / B0 (linear scaling rule; 0: off)", kOfferCli));
  add(enum_option<O, train::LrScaling>(
      "--lr-scale", [](O& o) -> train::LrScaling& { return o.lr_scale; },
      named<train::LrScaling>({train::LrScaling::linear, train::LrScaling::sqrt, train::LrScaling::none},
                              train::lr_scaling_name),
      "linear or sqrt (with --lr-scale-from; none: off)", kOfferCli));
  add(int_option<O>("--seed", [](O& o) -> uint64_t& { return o.seed; }, 0, INT64_MAX,
                    "Seed for shuffling, dropout masks and new heads", kOfferCli));
  add(flag_option<O>("--no-shuffle", [](O& o) -> bool& { return o.no_shuffle; }, "File order exactly, no regrouping",
                     kOfferCli));
  add(flag_option<O>("--no-group-by-length", [](O& o) -> bool& { return o.no_group_by_length; },
                     "Shuffle without grouping similar lengths", kOfferCli));
  add(int_option<O>("--log-every", [](O& o) -> int64_t& { return o.log_every; }, 1, kMaxSteps,
                    "Read the loss from the device every K steps (one host sync each)", kOfferCli));
  add(unset_default(enum_option<O, train::EvalStrategy>(
      "--eval-strategy", [](O& o) -> std::optional<train::EvalStrategy>& { return o.eval_strategy; },
      named<train::EvalStrategy>({train::EvalStrategy::steps, train::EvalStrategy::epoch, train::EvalStrategy::no},
                                 train::eval_strategy_name),
      "steps, epoch or no (default: steps with --eval)", kOfferCli)));
  add(unset_default(int_option<O>("--eval-every", [](O& o) -> int64_t& { return o.eval_every; }, 1, kMaxSteps,
                                  "Evaluate every K steps (default: --log-every)", kOfferCli)));
  add(int_option<O>("--save-every", [](O& o) -> int64_t& { return o.save_every; }, 0, kMaxSteps,
                    "Checkpoint every K steps (0: only the final model)", kOfferCli));
  add(int_option<O>("--save-total-limit", [](O& o) -> int64_t& { return o.save_total_limit; }, 0, 1'000'000,
                    "Keep the newest N checkpoints (0: all)", kOfferCli));
  add(flag_option<O>("--load-best", [](O& o) -> bool& { return o.load_best; },
                     "End with the weights of the best evaluation (--metric)", kOfferCli));
  add(enum_option<O, train::EvalMetric>(
      "--metric", [](O& o) -> train::EvalMetric& { return o.metric; },
      named<train::EvalMetric>(
          {train::kEvalMetrics[0], train::kEvalMetrics[1], train::kEvalMetrics[2], train::kEvalMetrics[3],
           train::kEvalMetrics[4], train::kEvalMetrics[5], train::kEvalMetrics[6], train::kEvalMetrics[7],
           train::kEvalMetrics[8], train::kEvalMetrics[9]},
          train::eval_metric_name),
      "For --load-best: eval_loss, eval_accuracy, eval_macro_f1 (classify); eval_cosine_ndcg@10, eval_cosine_mrr@10,"
      " eval_cosine_map@100, eval_cosine_recall@10, eval_cosine_accuracy@1 (retrieval sets), eval_spearman_cosine,"
      " eval_pearson_cosine (scored pairs)",
      kOfferCli));
  add(enum_option<O, train::Schedule>(
      "--schedule", [](O& o) -> train::Schedule& { return o.schedule; },
      named<train::Schedule>({train::Schedule::linear, train::Schedule::constant, train::Schedule::cosine},
                             train::schedule_name),
      "linear, constant or cosine", kOfferCli));
  add(int_option<O>("--warmup-steps", [](O& o) -> int64_t& { return o.warmup_steps; }, 0, kMaxSteps,
                    "Warmup steps (0: --warmup-ratio)", kOfferCli));
  add(real_option<O>("--warmup-ratio", [](O& o) -> double& { return o.warmup_ratio; }, 0, 1,
                     "Warmup as a fraction of all steps", kOfferCli));
  add(real_option<O>("--weight-decay", [](O& o) -> double& { return o.weight_decay; }, 0, 10,
                     "AdamW decoupled weight decay", kOfferCli));
  add(flag_option<O>("--decay-all", [](O& o) -> bool& { return o.decay_all; }, "Decay biases and LayerNorm weights too",
                     kOfferCli));
  add(real_option<O>("--max-grad-norm", [](O& o) -> double& { return o.max_grad_norm; }, 0, 1e6,
                     "Clip the global gradient norm (0: no clipping)", kOfferCli));
  add(real_option<O>("--loss-scale-init", [](O& o) -> double& { return o.loss_scale_init; }, 0, 3.4e38,
                     "--precision f16: the dynamic loss scale's first value (torch GradScaler's init_scale)", kOfferCli,
                     true));
  add(int_option<O>("--loss-scale-growth-interval", [](O& o) -> int64_t& { return o.loss_scale_growth_interval; }, 1,
                    1 << 30, "--precision f16: clean steps in a row before the loss scale doubles", kOfferCli));
  add(unset_default(real_option<O>("--dropout", [](O& o) -> std::optional<double>& { return o.dropout; }, 0, 1,
                                   "Every dropout probability (default: the config's; 0 disables)", kOfferCli, false,
                                   true)));
  add(real_option<O>("--label-smoothing", [](O& o) -> double& { return o.label_smoothing; }, 0, 1,
                     "Cross-entropy label smoothing", kOfferCli, false, true));
  add(int_option<O>("--num-labels", [](O& o) -> int64_t& { return o.num_labels; }, 0, 1 << 20,
                    "Outputs of the classification head (0: the model's; a new head when it changes)", kOfferCli));
  add(flag_option<O>("--new-labels", [](O& o) -> bool& { return o.new_labels; },
                     "Let labels outside a fine-tuned model's label names replace them (a new head)", kOfferCli));
  add(enum_option<O, bool>("--on-error", [](O& o) -> bool& { return o.skip_bad_records; },
                           {{"stop", false}, {"skip", true}}, "A bad record: stop, or skip it", kOfferCli));
  add(flag_option<O>("--no-graphs", [](O& o) -> bool& { return o.no_graphs; },
                     "CUDA: enqueue every micro-batch eagerly (default: replay a graph per length bucket)", kOfferCli));
  add(flag_option<O>("--debug-sync-each-step", [](O& o) -> bool& { return o.debug_sync_each_step; },
                     "Debugging: read from the device after every step (the mistake `stoke doctor` diagnoses)",
                     kOfferCli));
  return t;
}

}  // namespace

const OptionTable<TrainOptions>& train_option_table() {
  static const OptionTable<TrainOptions> table = make_table();
  return table;
}

}  // namespace stoke
