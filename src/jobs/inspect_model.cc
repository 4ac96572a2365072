// `stoke inspect` of a model folder or one safetensors file.
#include <algorithm>
#include <fmt/format.h>

#include "core/error.h"
#include "io/encoder_layout.h"
#include "io/model_folder.h"
#include "io/safetensors.h"
#include "jobs/inspect_parts.h"
#include "jobs/model_tokenizer.h"

namespace stoke::inspect {

namespace fs = std::filesystem;

namespace {

void print_tensor_table(const std::vector<const StoredTensor*>& tensors, std::ostream& out) {
  size_t width = 4;
  for (const auto* t : tensors) width = std::max(width, t->name.size());
  out << fmt::format("  {:<{}}  {:<5} {}\n", "name", width, "dtype", "shape");
  for (const auto* t : tensors)
    out << fmt::format("  {:<{}}  {:<5} {}\n", t->name, width, dtype_name(t->dtype), shape_text(t->shape));
}

uint64_t parameter_count(const std::vector<const StoredTensor*>& tensors) {
  uint64_t n = 0;
  for (const auto* t : tensors)
    if (dtype_is_float(t->dtype)) n += static_cast<uint64_t>(t->numel());
  return n;
}

// What the weights hold beyond the encoder itself.
struct Heads {
  bool pooler = false;
  bool classifier = false;          // every classifier tensor the architecture names is there
  std::string classifier_evidence;  // the head's output projection as stored, "classifier.weight [3, 64]"
};

Heads find_heads(const HfConfig& c, const std::vector<ResolvedTensor>& resolved) {
  Heads h;
  int expected = 0, present = 0;
  for (const auto& r : resolved) {
    if (r.expected.part == ExpectedTensor::pooler && r.view) h.pooler = true;
    if (r.expected.part != ExpectedTensor::classifier) continue;
    ++expected;
    if (!r.view) continue;
    ++present;
    if (h.classifier_evidence.empty()) h.classifier_evidence = r.stored_name + " " + shape_text(r.view->shape);
    // Better: the projection to the labels (BERT's classifier.weight, RoBERTa's out_proj.weight).
    if (r.view->shape.size() == 2 && r.view->shape[0] == c.num_labels())
      h.classifier_evidence = r.stored_name + " " + shape_text(r.view->shape);
  }
  h.classifier = expected > 0 && present == expected;
  return h;
}

std::string classification_architecture(const HfConfig& c) {
  for (const std::string& a : c.architectures)
    if (a.find("ForSequenceClassification") != std::string::npos) return a;
  return "";
}

// One line: does this folder embed or classify, and what says so. The
// weights decide (a head is there or not); the architectures entry and the
// sentence-transformers modules are what the user would look at, so the line
// names them too. config.json's label count is a transformers default (2)
// even in a plain encoder, so it is no evidence of a classifier.
std::string kind_line(const HfConfig& c, const SentenceTransformersConfig& st, const Heads& heads) {
  std::string chain;
  for (const auto& m : st.module_types) chain += (chain.empty() ? "" : " -> ") + m;
  const std::string named = classification_architecture(c);
  if (st.splade)  // a SparseEncoder: no sentence vector, sparse rows over the vocabulary
    return "kind: SPLADE sparse encoder — sentence-transformers SparseEncoder modules (" + chain +
           ", pooling_strategy " + std::string(splade_strategy_name(st.splade->strategy)) + ", activation " +
           std::string(splade_activation_name(*st.splade)) + "): `stoke embed` writes sparse rows over the " +
           std::to_string(c.vocab_size) + "-id vocabulary (CSR shards), no dense vector" +
           (st.splade->static_query_path.empty()
                ? std::string()
                : "; inference-free: --role query takes each query's static token weights (" +
                      st.splade->static_query_path + ", no forward), documents run " + st.transformer_path);
  if (st.colbert) {  // PyLate: a vector per token (model/colbert_model.h)
    const std::string dim = st.dense.empty() ? std::string("?") : std::to_string(st.dense.back().out_features);
    return "kind: ColBERT model (PyLate) — modules (" + chain + ") project every token to " + dim +
           " dimensions: `stoke embed --role query|document` writes ragged multi-vector rows (--outputs colbert), "
           "no dense vector";
  }
  if (heads.classifier) {
    std::string why = heads.classifier_evidence + (named.empty() ? "" : "; architectures " + named);
    const std::string what = c.num_labels() == 1 ? "reranker (a one-label cross-encoder)" : "classifier";
    if (st.present)
      return "kind: " + what + " and embedding model — classification head weights present (" + why +
             ") and sentence-transformers modules (" + chain + "): `stoke classify` uses the head, `stoke embed` "
             "and `stoke serve` the modules";
    return "kind: " + what + " — classification head weights present (" + why + ")";
  }
  if (!named.empty())
    return "kind: embedding model (an encoder without its classification head) — architectures names " + named +
           " but the weights hold no classifier tensors: `stoke classify` refuses it, `stoke train` starts a new head";
  if (st.present)
    return "kind: embedding model — sentence-transformers modules (" + chain + ") and no classification head";
  const std::string arch = c.architectures.empty() ? std::string("none listed") : "architectures " + c.architectures[0];
  return "kind: embedding model — a plain encoder (" + arch +
         "), no classification head and no sentence-transformers modules: `stoke embed` pools the mean";
}

}  // namespace

void safetensors_file(const fs::path& path, std::ostream& out) {
  auto file = SafetensorsFile::open(path);
  std::vector<const StoredTensor*> tensors;
  for (const auto& t : file->tensors()) tensors.push_back(&t);
  std::sort(tensors.begin(), tensors.end(), [](auto* a, auto* b) { return a->name < b->name; });
  out << "safetensors file: " << path.string() << " (" << with_commas(file->file_size()) << " bytes)\n";
  out << "tensors: " << tensors.size() << ", parameters: " << with_commas(parameter_count(tensors))
      << " (floating-point elements)\n";
  if (!file->metadata().empty()) {
    out << "metadata:\n";
    for (const auto& [k, v] : file->metadata()) out << "  " << k << ": " << v << "\n";
  }
  print_tensor_table(tensors, out);
}

void model_folder(const fs::path& dir, std::ostream& out) {
  ModelTokenizer mt = open_model_tokenizer(dir.string(), std::nullopt);
  const HfConfig& c = mt.folder.config;
  const Tokenizer& tok = *mt.tokenizer;
  // The weights first: whether there is a head decides the kind line and the labels.
  const ModelWeights weights = open_model_folder_weights(mt.folder);
  const auto resolved = resolve_encoder_tensors(c, weights, false, false);
  const Heads heads = find_heads(c, resolved);
  const auto& st = mt.folder.st;

  out << "model folder: " << dir.string() << "\n";
  std::string arch = c.architectures.empty() ? std::string("(none listed)") : c.architectures[0];
  out << "architecture: " << arch << " (model_type " << c.model_type_name << ")\n";
  out << kind_line(c, st, heads) << "\n";
  out << fmt::format(
      "dims: hidden {}, layers {}, heads {} (head dim {}), intermediate {}, vocab {}, max positions {} "
      "(usable {}), type vocab {}, layer_norm_eps {}, activation {}, pad id {}\n",
      c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.head_dim(), c.intermediate_size, c.vocab_size,
      c.max_position_embeddings, c.usable_positions(), c.type_vocab_size, c.layer_norm_eps, c.hidden_act,
      c.pad_token_id);
  // What the description adds beyond BERT's shape: ELECTRA's narrower
  // embeddings and MPNet's relative-position bias.
  if (c.embedding_size != c.hidden_size)
    out << fmt::format("embeddings: {} wide, projected to hidden {} (embeddings_project)\n", c.embedding_size,
                       c.hidden_size);
  if (c.relative_attention_num_buckets > 0)
    out << fmt::format("attention: relative-position bias, {} buckets shared by the layers\n",
                       c.relative_attention_num_buckets);
  if (c.arch->positions == PositionScheme::rotary)  // GTE, NomicBERT
    out << fmt::format("positions: rotary (theta {}, {} of {} head columns{}); feed-forward: gated ({}GLU){}\n",
                       c.rope_theta, c.rotary_dim, c.head_dim(), c.rotary_interleaved ? ", interleaved" : "",
                       c.hidden_act == "silu" ? "Swi" : "Ge",
                       c.remote_code.empty() ? "" : "; remote code " + c.remote_code + " read from config.json, not run");
  if (c.arch->family == LayerFamily::prenorm_encoder) {  // ModernBERT: which layers are local, their window, the two rotary bases
    std::string kinds;
    for (size_t l = 0; l < c.attention_window.size(); ++l)
      kinds += (l ? ", " : "") + (c.attention_window[l] ? fmt::format("local +-{}", c.attention_window[l])
                                                         : std::string("global"));
    out << fmt::format("attention: {}; rotary theta {} global, {} local; pre-norm, GeGLU, classifier pooling {}\n",
                       kinds, c.rope_theta, c.local_rope_theta, c.classifier_mean_pooling ? "mean" : "cls");
  }
  if (heads.classifier) {  // an encoder's id2label is config.json's default, not labels anyone trained
    std::string labels;
    for (size_t i = 0; i < c.id2label.size(); ++i) labels += (i ? ", " : "") + c.id2label[i];
    const std::string problem(problem_type_name(c.problem_type));
    out << "labels: " << c.num_labels() << (labels.empty() ? "" : " (" + labels + ")")
        << (problem.empty() ? "" : ", problem_type " + problem) << "\n";
  }
  out << "tokenizer: " << tok.model().describe() << " from " << tok.source << ", vocab size " << tok.vocab_size()
      << ", " << tok.added_tokens().tokens().size() << " added/special tokens"
      << (tok.lowercase_input() ? ", input lowercased (sentence_bert_config)" : "") << "\n";
  out << "max length: " << mt.max_length << " (from " << mt.max_length_from << ")\n";
  if (st.present) {
    std::string chain;
    for (const auto& m : st.module_types) chain += (chain.empty() ? "" : " -> ") + m;
    out << "sentence-transformers: " << chain;
    if (st.pooling) out << "; pooling " << pooling_name(*st.pooling);
    out << (st.normalize ? "; normalize" : "; no normalize");
    if (st.max_seq_length) out << "; max_seq_length " << *st.max_seq_length;
    out << "\n";
    if (!st.prompts.empty()) {
      out << "prompts:";
      for (const auto& [name, text] : st.prompts) out << " " << name << "=\"" << text << "\"";
      if (st.default_prompt_name) out << " (default " << *st.default_prompt_name << ")";
      out << "\n";
    }
  } else {
    out << "sentence-transformers: none (embed defaults: mean pooling, no normalize)\n";
  }

  std::vector<const StoredTensor*> tensors;
  for (const auto& [name, entry] : weights.tensors()) tensors.push_back(entry.view);
  // "model.safetensors", "pytorch_model.bin (torch.save zip, read without running code)", "3 shards".
  std::string files = weights.sharded() ? std::to_string(weights.files().size()) + " shards"
                                        : weights.files().front()->path().filename().string();
  if (weights.files().front()->format() == "torch") files += " (torch.save zip, read without running code)";
  out << "weights: " << files
      << ", " << tensors.size() << " tensors, " << with_commas(parameter_count(tensors)) << " parameters"
      << "; pooler " << (heads.pooler ? "present" : "absent") << ", classifier "
      << (heads.classifier ? "present" : "absent") << "; every shape matches config.json\n";
  print_tensor_table(tensors, out);
}

}  // namespace stoke::inspect
