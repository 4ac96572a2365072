// The common options' table (jobs/common_options.h): every job that reads
// texts takes these, each where its `uses` bits say.
#include "jobs/common_options.h"

namespace stoke {

namespace {

using O = CommonOptions;

OptionTable<O> make_table() {
  OptionTable<O> t;
  auto add = [&t](Option<O> o, unsigned uses = ~0u, unsigned unless = 0) {
    o.uses = uses;
    o.unless = unless;
    t.push_back(std::move(o));
  };
  add(text_option<O>("--model", [](O& o) -> std::string& { return o.model; },
                     "Hugging Face model folder (config.json, tokenizer files, weights), or a hub id "
                     "ORG/NAME[@REVISION] already in the local Hugging Face cache (never downloaded); required",
                     kOfferCli, false));
  {
    Option<O> in;
    in.flag = "--input";
    in.kind = OptionKind::list;
    in.help =
        "Input: JSONL (one object per line), CSV or TSV (a header row naming the columns) or plain text (one text "
        "per line); - reads stdin (the default when stdin is not a terminal). Several files (repeat the flag or "
        "list them), a folder (its files) or a quoted pattern ('parts/*.jsonl') read as one input, in sorted name "
        "order";
    in.offer = kOfferCli;
    in.type_name = "TEXT";  // the parser adds "..." for a list
    in.set = [](O& o, const std::string& text) { o.inputs.push_back(text); };
    add(std::move(in), kManyInputs);
  }
  add(text_option<O>("--input", [](O& o) -> std::string& { return o.input; },
                     "Input file: JSONL (one object per line), CSV or TSV (a header row naming the columns) or plain "
                     "text (one text per line); - reads stdin (the default when stdin is not a terminal)",
                     kOfferCli),
      kInput, kManyInputs);
  add(text_option<O>("--input-format", [](O& o) -> std::string& { return o.input_format; },
                     "jsonl, csv, tsv or text (default: from the file name: .csv, .tsv, .txt, else JSONL)", kOfferBoth,
                     false),
      kRecords);
  add(text_option<O>("--text-field", [](O& o) -> std::string& { return o.text_field; }, "Field holding the text"),
      kRecords);
  add(text_option<O>("--pair-field", [](O& o) -> std::string& { return o.pair_field; },
                     "Field holding the second text of a pair (optional per record)"),
      kPairField);
  add(text_option<O>("--id-field", [](O& o) -> std::string& { return o.id_field; },
                     "Field holding the record id (default: the 0-based record number; tokenize adds \"id\" when "
                     "given)",
                     kOfferBoth, false),
      kIdField);
  add(int_option<O>("--max-length", [](O& o) -> std::optional<int64_t>& { return o.max_length; }, 1, 1 << 20,
                    "Max tokens per sequence, specials included (default: sentence_bert_config max_seq_length, else "
                    "tokenizer model_max_length, else the model's usable positions)"));
  {
    Option<O> d;
    d.flag = "--device";
    d.kind = OptionKind::text;
    d.help = "auto, cpu, cuda or cuda:N";
    d.type_name = "TEXT";
    d.set = [](O& o, const std::string& text) { o.device = parse_device(text); };
    d.show = [](const O& o) { return o.device.text(); };
    add(std::move(d), kDevice);
  }
  add(enum_option<O, Precision>("--precision", [](O& o) -> Precision& { return o.precision; }, precision_words(),
                                "f32, bf16, f16 or int8 (embed and classify on the CPU)"),
      kDevice);
  add(int_option<O>("--workers", [](O& o) -> int& { return o.workers; }, 0, max_workers(),
                    "Tokenizer threads (0: the job's default)", kOfferBoth, max_workers_reason()),
      kWorkers);
  add(int_option<O>("--batch-tokens", [](O& o) -> int64_t& { return o.batch_tokens; }, 1, 1 << 24,
                    "Tokens per batch (token budget)"),
      kBatchTokens);
  add(text_option<O>("--trace", [](O& o) -> std::string& { return o.trace; },
                     "Write a Chrome trace-event JSON timeline here", kOfferBoth, false));
  add(real_option<O>("--stop-timeout", [](O& o) -> double& { return o.stop_timeout; }, 0, 3600,
                     "On SIGTERM/SIGINT: seconds to finish the batches in flight and keep what is done before the "
                     "process exits without them (a second signal exits at once)",
                     kOfferCli, true),
      kStops);
  add(flag_option<O>("--quiet", [](O& o) -> bool& { return o.quiet; }, "No progress bar and no summary", kOfferCli));
  add(text_option<O>("--config", [](O& o) -> std::string& { return o.config; },
                     "JSON object of flag: value (e.g. from `stoke tune`); command-line flags win", kOfferCli, false));
  return t;
}

}  // namespace

const OptionTable<CommonOptions>& common_option_table() {
  static const OptionTable<CommonOptions> table = make_table();
  return table;
}

}  // namespace stoke
