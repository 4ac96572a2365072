// Evaluation sets of embedding models (what `stoke train --eval PATH` names
// for the contrastive objectives; docs/training.md "Evaluation sets for
// embedding models"): read into texts and index structures, which the caller
// tokenizes, embeds and hands to train/embedding_eval_metrics.h.
//
//   PATH is a folder ──────────────> BEIR retrieval set: corpus.jsonl, queries.jsonl, qrels/<split>.tsv
//   PATH is a file, first record has
//     sentence1, sentence2, score ─> scored pairs (pearson_cosine, spearman_cosine)
//     anchor, positive ────────────> pairs as retrieval: each anchor a query, its positive the relevant doc
//
// Records come through the pipeline's record reader (JSONL, CSV, TSV), so
// invalid UTF-8 is replaced and counted as everywhere else. An evaluation set
// is small and must be whole: a bad record, a duplicate id, an id the qrels
// name that the set lacks, or an empty set throws Error naming file:line and
// the field (two lines for a duplicate); nothing is skipped silently.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/record_reader.h"

namespace stoke::train {

enum class EvalSetKind { beir_retrieval, scored_pairs, pairs_retrieval };
const char* eval_set_kind_name(EvalSetKind k);  // "beir-retrieval", "scored-pairs", "pairs-retrieval"

struct EvalSetOptions {
  std::optional<InputFormat> format;  // files only; nullopt: from the file name (.csv, .tsv, else JSONL)
  // Pairs as retrieval. negatives unset: every column of the first record
  // whose name starts with "negative" (as the training data's hard negatives).
  std::string anchor_field = "anchor", positive_field = "positive";
  std::optional<std::vector<std::string>> negative_fields;
  // Scored pairs.
  std::string sentence1_field = "sentence1", sentence2_field = "sentence2", score_field = "score";
  // BEIR: the qrels file qrels/<split>.tsv; "" = test.tsv, else dev.tsv,
  // else the only .tsv in qrels/.
  std::string qrels_split;
};

// Queries against a corpus. relevant[q] holds corpus rows (sorted, distinct);
// every query has at least one.
struct RetrievalEvalSet {
  std::string source;  // the folder or file read
  std::string qrels_path;  // BEIR: the qrels file used
  std::vector<std::string> query_ids, queries;
  std::vector<std::string> corpus_ids, corpus;
  std::vector<std::vector<uint32_t>> relevant;
  // Per corpus row: its position in ascending byte order of corpus_ids
  // (Python's str order for UTF-8): ST breaks score ties by ascending corpus
  // id, and the metrics break them by this (embedding_eval_metrics.h).
  std::vector<uint32_t> corpus_tie_rank;
  // Queries read but left out: no judgement with score > 0 (ST's evaluator
  // drops such queries too).
  uint64_t queries_left_out = 0;
  uint64_t replaced_utf8 = 0;  // invalid UTF-8 bytes replaced by U+FFFD
};

struct ScoredPairsEvalSet {
  std::string source;
  std::vector<std::string> sentences1, sentences2;
  std::vector<double> scores;
  uint64_t replaced_utf8 = 0;
};

struct EvalSet {
  EvalSetKind kind = EvalSetKind::beir_retrieval;
  RetrievalEvalSet retrieval;  // beir_retrieval, pairs_retrieval
  ScoredPairsEvalSet pairs;    // scored_pairs
};

// What PATH holds, by the rule above. Throws Error(not_found) for a missing
// path, Error(invalid_argument) for a file whose first record has neither
// set of columns (naming the columns it has and both choices).
EvalSetKind detect_eval_set_kind(const std::string& path, const EvalSetOptions& options = {});

// Detects and reads.
EvalSet read_eval_set(const std::string& path, const EvalSetOptions& options = {});

// BEIR: corpus.jsonl (_id, text, optional title; a document's text is
// (title + " " + text) stripped of whitespace at both ends when it has a
// title, else text stripped — as BEIR's SentenceBERT.encode_corpus makes it),
// queries.jsonl (_id, text, taken as written), qrels (a header, then
// query-id, corpus-id, score per row, tab-separated; columns by those names,
// or the first three by position as BEIR reads them; score > 0 relevant).
// Ids are strings (a JSON integer _id is taken as its decimal digits).
// Corpus and queries keep file order.
RetrievalEvalSet read_beir_eval_set(const std::string& folder, const EvalSetOptions& options = {});

// JSONL / CSV / TSV records with two sentences and a finite number.
ScoredPairsEvalSet read_scored_pairs_eval_set(const std::string& path, const EvalSetOptions& options = {});

// JSONL / CSV / TSV records with an anchor, a positive and any negatives.
// Each distinct anchor is a query (query id: the record number of its first
// record); every positive of its records is relevant to it. The corpus is
// every distinct positive and negative text, in order of first appearance
// (corpus id: its row number; ties go to the earlier row).
RetrievalEvalSet read_pairs_retrieval_eval_set(const std::string& path, const EvalSetOptions& options = {});

}  // namespace stoke::train
