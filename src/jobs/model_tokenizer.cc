#include "jobs/model_tokenizer.h"

#include "core/error.h"
#include "text/tokenizer_loader.h"

namespace stoke {

ModelTokenizer open_model_tokenizer(const std::string& model_dir, std::optional<int64_t> cli_max_length) {
  if (model_dir.empty()) throw Error(Errc::invalid_argument, "--model: a model folder is required");
  ModelTokenizer mt;
  mt.folder = open_model_folder(model_dir);
  TokenizerLoadOptions load;
  load.lowercase_input = mt.folder.st.do_lower_case.value_or(false);
  mt.tokenizer = load_tokenizer(mt.folder.model_dir, load);
  check_vocab_covers(mt.folder.config, mt.tokenizer->vocab_size() - 1,
                     (mt.folder.model_dir / mt.tokenizer->source).string());

  const int64_t usable = mt.folder.config.usable_positions();
  if (cli_max_length) {
    mt.max_length = *cli_max_length;
    mt.max_length_from = "--max-length";
    if (mt.max_length > usable) {
      throw Error(Errc::invalid_argument,
                  "--max-length " + std::to_string(mt.max_length) + " is more than the model's " +
                      std::to_string(usable) + " usable positions (config.json max_position_embeddings " +
                      std::to_string(mt.folder.config.max_position_embeddings) + ")");
    }
  } else if (mt.folder.st.max_seq_length) {
    mt.max_length = std::min(*mt.folder.st.max_seq_length, usable);
    mt.max_length_from = "sentence_bert_config.json max_seq_length";
  } else if (mt.tokenizer->model_max_length) {
    mt.max_length = std::min(*mt.tokenizer->model_max_length, usable);
    mt.max_length_from = "tokenizer_config.json model_max_length";
  } else {
    mt.max_length = usable;
    mt.max_length_from = "config.json usable positions";
  }
  // A single text needs its special tokens ([CLS] ... [SEP]: 2); a pair
  // needs more, which the tokenizer checks per record, where pairs are known.
  const int64_t specials = static_cast<int64_t>(mt.tokenizer->special_tokens_added(false));
  if (mt.max_length < specials) {
    throw Error(Errc::invalid_argument, "max length " + std::to_string(mt.max_length) + " (from " +
                                            mt.max_length_from + "): expected at least " + std::to_string(specials) +
                                            ", the special tokens this model adds to a text");
  }
  return mt;
}

}  // namespace stoke
