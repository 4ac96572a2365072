// Training data of embedding models (stoke train --objective mnrl, ...):
// records with named text columns — anchor, positive and any number of
// negatives, or two sentences and a score — read by the pipeline's record
// reader, every distinct text kept once (a text shared by records is one
// entry: tokenized once, and what the no-duplicates batching compares), and
// the batches an epoch visits.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "pipeline/record_reader.h"
#include "text/tokenizer.h"
#include "train/train_data.h"

namespace stoke::train {

// What stoke train optimizes. classify: the sequence classifier (the
// default); the others train the sentence embedding (docs/training.md
// "Embedding models").
enum class Objective { classify, mnrl, mnrl_symmetric, cosent, cosine_mse };
const char* objective_name(Objective o);  // "classify", "mnrl", "mnrl-symmetric", "cosent", "cosine-mse"
// cosent and cosine-mse learn from scored pairs (sentence1, sentence2, score).
bool objective_takes_scores(Objective o);

// The columns of each record. Unset names take the objective's defaults:
// anchor / positive (mnrl kinds) or sentence1 / sentence2 / score (scored pairs).
struct ContrastiveColumns {
  std::string anchor, positive, score;
  // Hard negatives (mnrl kinds), in the order they join the batch. Unset:
  // every field of the first record whose name starts with "negative", in
  // the record's order (negative, negative_1, negative_2, ...).
  std::optional<std::vector<std::string>> negatives;
};

struct ContrastiveExample {
  std::vector<uint32_t> texts;  // per column (anchor, positive, negatives...): an index into texts
  float score = 0;              // scored pairs
  uint64_t record = 0;          // record number in its file
};

struct ContrastiveDataset {
  std::string path, sha256;
  std::vector<std::string> columns;  // the text columns read, in group order
  std::string score_column;          // "" for the mnrl kinds
  std::vector<std::string> texts;    // the distinct texts
  std::vector<ContrastiveExample> examples;
  std::vector<InputRecord> bad;      // skipped bad records (--on-error skip)
  uint64_t replaced_utf8 = 0;
};

// The field names of a file's first record (JSONL: its keys in order; CSV /
// TSV: the header), for choosing columns and for saying what a file has.
std::vector<std::string> first_record_fields(const RecordReaderOptions& options);

// Reads every record. A file without the objective's columns is refused
// naming the objective, the columns it needs and the ones the file has; a
// bad record (missing column, a score that is not a number) throws
// Error(format) naming file:line and the field, unless skip_bad.
ContrastiveDataset read_contrastive_dataset(const RecordReaderOptions& base, const ContrastiveColumns& columns,
                                            Objective objective, bool skip_bad);

// Every distinct text tokenized (ids, type ids; label unused), on the pool.
std::vector<Example> tokenize_texts(const std::vector<std::string>& texts, const Tokenizer& tokenizer,
                                    const EncodeOptions& encode, ThreadPool* pool, TokenizeStats* stats);

// The epoch's batches of example indices, as sentence-transformers'
// NoDuplicatesBatchSampler forms them: examples visited in a seeded
// permutation (file order without shuffle), each batch filled from the front
// of what is left, skipping an example that shares a text with one already in
// the batch (an in-batch negative equal to a positive would be a false
// negative); a skipped example waits for a later batch. The last batch may
// be smaller. A pure function of (seed, epoch): a resumed run sees the same.
std::vector<std::vector<uint32_t>> no_duplicate_batches(const ContrastiveDataset& data, int64_t batch_size,
                                                        bool shuffle, uint64_t seed, int64_t epoch);

}  // namespace stoke::train
