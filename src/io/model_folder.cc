#include "io/model_folder.h"

namespace stoke {

namespace fs = std::filesystem;

ModelFolder open_model_folder(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw Error(Errc::not_found, dir.string() + ": no such model folder");
  if (!fs::is_directory(dir, ec)) {
    throw Error(Errc::invalid_argument, dir.string() + ": is a file; --model expects a model folder");
  }
  if (!fs::exists(dir / "config.json", ec) && !fs::exists(dir / "modules.json", ec)) {
    throw ModelFolderError(ModelFolderErrc::no_config,
                           dir.string() + ": no config.json; a Hugging Face model folder needs one");
  }
  ModelFolder mf;
  mf.dir = dir;
  mf.st = load_sentence_transformers(dir);
  mf.model_dir = mf.st.transformer_path.empty() ? dir : dir / mf.st.transformer_path;
  mf.config = load_hf_config(mf.model_dir);
  if (mf.st.word_embedding_dimension && *mf.st.word_embedding_dimension != mf.config.hidden_size) {
    throw ModelFolderError(ModelFolderErrc::shape_mismatch,
                           dir.string() + ": the Pooling module's word_embedding_dimension " +
                               std::to_string(*mf.st.word_embedding_dimension) +
                               " contradicts config.json hidden_size " + std::to_string(mf.config.hidden_size));
  }
  return mf;
}

ModelWeights open_model_folder_weights(const ModelFolder& folder) { return open_model_weights(folder.model_dir); }

void check_vocab_covers(const HfConfig& config, int64_t max_token_id, std::string_view source) {
  if (max_token_id >= config.vocab_size) {
    throw ModelFolderError(ModelFolderErrc::vocab_too_small,
                           std::string(source) + " produces token id " + std::to_string(max_token_id) +
                               ", but config.json vocab_size is " + std::to_string(config.vocab_size) +
                               " (the word embeddings have no row for it)");
  }
}

}  // namespace stoke
