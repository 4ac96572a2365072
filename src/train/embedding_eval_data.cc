#include "train/embedding_eval_data.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <unordered_map>

#include "core/error.h"
#include "core/utf8.h"
#include "train/contrastive_data.h"

namespace stoke::train {

namespace fs = std::filesystem;
using json = nlohmann::json;

const char* eval_set_kind_name(EvalSetKind k) {
  switch (k) {
    case EvalSetKind::beir_retrieval: return "beir-retrieval";
    case EvalSetKind::scored_pairs: return "scored-pairs";
    case EvalSetKind::pairs_retrieval: return "pairs-retrieval";
  }
  return "?";
}

namespace {

std::string joined(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 20; ++i) s += (i ? ", " : "") + json(names[i]).dump();
  if (names.size() > 20) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s.empty() ? "none" : s;
}

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::string at_line(const std::string& path, uint64_t line) { return path + ":" + std::to_string(line) + ": "; }

// The reader's messages name the flags of `stoke embed` (--id-field, ...);
// an evaluation set's columns are not set by those flags, so they go.
std::string without_flag_names(std::string m) {
  const size_t label = m.find(" (--label-field)");
  if (label != std::string::npos) {
    const size_t why = m.find(" (expected the example's label", label);
    if (why != std::string::npos) m = m.substr(0, why) + " (expected a number)";
  }
  for (const char* flag : {" (--label-field)", " (--id-field)", " (--text-field)", " (a text column)"})
    for (size_t at; (at = m.find(flag)) != std::string::npos;) m.erase(at, std::string(flag).size());
  return m;
}

// Every record of a file; a bad record throws naming file:line, as every
// evaluation set is read whole or not at all.
template <class F>
void for_each_record(const RecordReaderOptions& o, F&& f) {
  std::unique_ptr<RecordReader> reader;
  try {
    reader = std::make_unique<RecordReader>(o);
  } catch (const Error& e) {
    throw Error(e.code(), without_flag_names(e.what()));
  }
  InputRecord rec;
  while (reader->next(rec)) {
    if (!rec.error.empty()) throw Error(Errc::format, without_flag_names(describe_bad_record(*reader, rec)));
    f(rec, reader->label());
  }
}

// The record's id as a string: a JSON string as it is, a JSON integer as its
// digits (ids are compared as strings, as BEIR and ST do).
std::string id_of(const InputRecord& rec, const std::string& path, const std::string& field) {
  const json v = json::parse(rec.id_json, nullptr, false);
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return v.dump();
  throw Error(Errc::format, at_line(path, rec.line) + "field \"" + field + "\": expected a string id, found " +
                                std::string(v.type_name()));
}

// Python's str.isspace() set, which BEIR's .strip() removes.
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// s without leading and trailing whitespace (s is valid UTF-8: the reader made it so).
std::string py_strip(const std::string& s) {
  size_t begin = 0, end = s.size();
  while (begin < end) {
    size_t i = begin;
    if (!is_py_space(utf8_decode(s, i))) break;
    begin = i;
  }
  while (end > begin) {
    size_t start = end - 1;  // back up to the first byte of the last code point
    while (start > begin && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t i = start;
    if (!is_py_space(utf8_decode(s, i))) break;
    end = start;
  }
  return s.substr(begin, end - begin);
}

// ids -> position in ascending byte order.
std::vector<uint32_t> tie_ranks(const std::vector<std::string>& ids) {
  std::vector<uint32_t> order(ids.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) { return ids[a] < ids[b]; });
  std::vector<uint32_t> rank(ids.size());
  for (size_t i = 0; i < order.size(); ++i) rank[order[i]] = static_cast<uint32_t>(i);
  return rank;
}

struct IdTable {
  std::unordered_map<std::string, std::pair<uint32_t, uint64_t>> rows;  // id -> (row, line)
  // Adds id at row; a second record with it throws naming both lines.
  void add(const std::string& id, uint32_t row, const std::string& path, uint64_t line) {
    auto [it, fresh] = rows.emplace(id, std::make_pair(row, line));
    if (!fresh)
      throw Error(Errc::format, at_line(path, line) + "duplicate _id " + json(id).dump() + " (also on line " +
                                    std::to_string(it->second.second) + ")");
  }
};

std::string qrels_file(const fs::path& folder, const std::string& split) {
  const fs::path dir = folder / "qrels";
  if (!split.empty()) {
    if (split.find('/') != std::string::npos || split == "..")
      throw Error(Errc::invalid_argument, "qrels split \"" + split + "\": expected a name such as test or dev");
    const fs::path p = dir / (split + ".tsv");
    if (!fs::is_regular_file(p))
      throw Error(Errc::not_found, p.string() + ": no such qrels file (the split asked for)");
    return p.string();
  }
  for (const char* name : {"test.tsv", "dev.tsv"})
    if (fs::is_regular_file(dir / name)) return (dir / name).string();
  std::vector<std::string> tsv;
  std::error_code ec;
  if (fs::is_directory(dir, ec))
    for (const auto& e : fs::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().extension() == ".tsv") tsv.push_back(e.path().string());
  if (tsv.size() == 1) return tsv[0];
  std::sort(tsv.begin(), tsv.end());
  throw Error(Errc::not_found,
              dir.string() + ": " +
                  (tsv.empty() ? std::string("no qrels (expected qrels/test.tsv, qrels/dev.tsv or one .tsv file)")
                               : "no test.tsv or dev.tsv, and " + std::to_string(tsv.size()) +
                                     " other .tsv files (" + joined(tsv) + "): name the split to use"));
}

void require_file(const fs::path& p, const std::string& what) {
  if (!fs::is_regular_file(p))
    throw Error(Errc::not_found, p.string() + ": missing (" + what + ")");
}

constexpr const char* kBeirLayout = "a BEIR folder holds corpus.jsonl, queries.jsonl and qrels/test.tsv";

}  // namespace

RetrievalEvalSet read_beir_eval_set(const std::string& folder, const EvalSetOptions& options) {
  const fs::path dir(folder);
  if (!fs::is_directory(dir)) throw Error(Errc::not_found, folder + ": not a folder (" + kBeirLayout + ")");
  const fs::path corpus_path = dir / "corpus.jsonl", queries_path = dir / "queries.jsonl";
  require_file(corpus_path, kBeirLayout);
  require_file(queries_path, kBeirLayout);
  RetrievalEvalSet s;
  s.source = folder;
  s.qrels_path = qrels_file(dir, options.qrels_split);

  RecordReaderOptions o;
  o.format = InputFormat::jsonl;
  o.path = corpus_path.string();
  o.text_field = "text";
  o.id_field = "_id";
  o.pair_field = "title";  // optional: a string or null
  IdTable corpus_rows;
  for_each_record(o, [&](InputRecord& rec, const std::string& path) {
    std::string id = id_of(rec, path, "_id");
    corpus_rows.add(id, static_cast<uint32_t>(s.corpus.size()), path, rec.line);
    s.corpus.push_back(rec.pair ? py_strip(*rec.pair + " " + rec.text) : py_strip(rec.text));
    s.corpus_ids.push_back(std::move(id));
    s.replaced_utf8 += rec.replaced_utf8;
  });
  if (s.corpus.empty()) throw Error(Errc::invalid_argument, o.path + ": no documents (an empty corpus)");

  o.path = queries_path.string();
  o.pair_field.clear();
  IdTable query_rows;
  std::vector<std::string> all_ids, all_texts;
  for_each_record(o, [&](InputRecord& rec, const std::string& path) {
    std::string id = id_of(rec, path, "_id");
    query_rows.add(id, static_cast<uint32_t>(all_ids.size()), path, rec.line);
    all_ids.push_back(std::move(id));
    all_texts.push_back(std::move(rec.text));
    s.replaced_utf8 += rec.replaced_utf8;
  });
  if (all_ids.empty()) throw Error(Errc::invalid_argument, o.path + ": no queries (an empty file)");

  // qrels: columns by name, else the first three by position.
  RecordReaderOptions q;
  q.format = InputFormat::tsv;
  q.path = s.qrels_path;
  const std::vector<std::string> header = first_record_fields(q);
  std::vector<std::string> cols{"query-id", "corpus-id", "score"};
  if (!(has(header, cols[0]) && has(header, cols[1]) && has(header, cols[2]))) {
    if (header.size() < 3)
      throw Error(Errc::format, at_line(s.qrels_path, 1) + "the header has " + joined(header) +
                                    " (expected query-id, corpus-id, score, tab-separated)");
    cols.assign(header.begin(), header.begin() + 3);
  }
  q.text_field = cols[0];
  q.more_fields = {cols[1]};
  q.label_field = cols[2];
  std::vector<std::vector<uint32_t>> relevant(all_ids.size());
  std::map<std::pair<uint32_t, uint32_t>, uint64_t> judged;  // (query, doc) -> line
  uint64_t judgements = 0;
  for_each_record(q, [&](InputRecord& rec, const std::string& path) {
    const std::string& qid = rec.text;
    const std::string& cid = rec.more[0];
    auto qi = query_rows.rows.find(qid);
    if (qi == query_rows.rows.end())
      throw Error(Errc::format, at_line(path, rec.line) + "field \"" + cols[0] + "\": query id " + json(qid).dump() +
                                    " is not in " + queries_path.string());
    auto ci = corpus_rows.rows.find(cid);
    if (ci == corpus_rows.rows.end())
      throw Error(Errc::format, at_line(path, rec.line) + "field \"" + cols[1] + "\": corpus id " + json(cid).dump() +
                                    " is not in " + corpus_path.string());
    const json score = json::parse(rec.label_json, nullptr, false);
    if (!score.is_number() || !std::isfinite(score.get<double>()))
      throw Error(Errc::format, at_line(path, rec.line) + "field \"" + cols[2] +
                                    "\": expected a number (the judgement's relevance), found " + rec.label_json);
    auto [it, fresh] = judged.emplace(std::make_pair(qi->second.first, ci->second.first), rec.line);
    if (!fresh)
      throw Error(Errc::format, at_line(path, rec.line) + "query " + json(qid).dump() + " and document " +
                                    json(cid).dump() + " are judged twice (also on line " +
                                    std::to_string(it->second) + ")");
    ++judgements;
    if (score.get<double>() > 0) relevant[qi->second.first].push_back(ci->second.first);
  });
  if (judgements == 0) throw Error(Errc::invalid_argument, s.qrels_path + ": no judgements (only a header)");

  for (size_t i = 0; i < all_ids.size(); ++i) {
    if (relevant[i].empty()) {
      ++s.queries_left_out;
      continue;
    }
    std::sort(relevant[i].begin(), relevant[i].end());
    s.query_ids.push_back(std::move(all_ids[i]));
    s.queries.push_back(std::move(all_texts[i]));
    s.relevant.push_back(std::move(relevant[i]));
  }
  if (s.queries.empty())
    throw Error(Errc::invalid_argument, s.qrels_path + ": no query has a judgement with score > 0 (" +
                                            std::to_string(judgements) + " judgements, none relevant)");
  s.corpus_tie_rank = tie_ranks(s.corpus_ids);
  return s;
}

namespace {

RecordReaderOptions file_options(const std::string& path, const EvalSetOptions& options) {
  RecordReaderOptions o;
  o.path = path;
  o.format = options.format;
  const InputFormat f = options.format ? *options.format : input_format_for_path(path);
  if (f == InputFormat::text)
    throw Error(Errc::invalid_argument, path + ": a plain text file has no fields (an evaluation set is JSONL, CSV "
                                               "or TSV records, or a BEIR folder)");
  return o;
}

}  // namespace

ScoredPairsEvalSet read_scored_pairs_eval_set(const std::string& path, const EvalSetOptions& options) {
  RecordReaderOptions o = file_options(path, options);
  o.text_field = options.sentence1_field;
  o.more_fields = {options.sentence2_field};
  o.label_field = options.score_field;
  ScoredPairsEvalSet s;
  s.source = path;
  for_each_record(o, [&](InputRecord& rec, const std::string& file) {
    const json v = json::parse(rec.label_json, nullptr, false);
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      throw Error(Errc::format, at_line(file, rec.line) + "field \"" + options.score_field +
                                    "\" (the pair's gold score): expected a finite number, found " + rec.label_json);
    s.sentences1.push_back(std::move(rec.text));
    s.sentences2.push_back(std::move(rec.more[0]));
    s.scores.push_back(v.get<double>());
    s.replaced_utf8 += rec.replaced_utf8;
  });
  if (s.scores.size() < 2)
    throw Error(Errc::invalid_argument, path + ": " + std::to_string(s.scores.size()) +
                                            " scored pairs (correlations need at least 2)");
  return s;
}

RetrievalEvalSet read_pairs_retrieval_eval_set(const std::string& path, const EvalSetOptions& options) {
  RecordReaderOptions o = file_options(path, options);
  std::vector<std::string> negatives;
  if (options.negative_fields) {
    negatives = *options.negative_fields;
  } else {
    for (const std::string& f : first_record_fields(o))
      if (f.rfind("negative", 0) == 0) negatives.push_back(f);
  }
  o.text_field = options.anchor_field;
  o.more_fields = {options.positive_field};
  o.more_fields.insert(o.more_fields.end(), negatives.begin(), negatives.end());
  RetrievalEvalSet s;
  s.source = path;
  std::unordered_map<std::string, uint32_t> query_of, doc_of;
  auto doc = [&](std::string&& t) {
    auto [it, fresh] = doc_of.emplace(std::move(t), static_cast<uint32_t>(s.corpus.size()));
    if (fresh) s.corpus.push_back(it->first);
    return it->second;
  };
  for_each_record(o, [&](InputRecord& rec, const std::string&) {
    auto [q, fresh] = query_of.emplace(rec.text, static_cast<uint32_t>(s.queries.size()));
    if (fresh) {
      s.queries.push_back(std::move(rec.text));
      s.query_ids.push_back(std::to_string(rec.index));
      s.relevant.emplace_back();
    }
    s.relevant[q->second].push_back(doc(std::move(rec.more[0])));
    for (size_t i = 1; i < rec.more.size(); ++i) doc(std::move(rec.more[i]));
    s.replaced_utf8 += rec.replaced_utf8;
  });
  if (s.queries.empty()) throw Error(Errc::invalid_argument, path + ": no records (an empty evaluation set)");
  for (auto& r : s.relevant) {
    std::sort(r.begin(), r.end());
    r.erase(std::unique(r.begin(), r.end()), r.end());
  }
  s.corpus_ids.reserve(s.corpus.size());
  s.corpus_tie_rank.resize(s.corpus.size());
  for (size_t i = 0; i < s.corpus.size(); ++i) {
    s.corpus_ids.push_back(std::to_string(i));
    s.corpus_tie_rank[i] = static_cast<uint32_t>(i);  // row order, not the ids' string order
  }
  return s;
}

EvalSetKind detect_eval_set_kind(const std::string& path, const EvalSetOptions& options) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st))
    throw Error(Errc::not_found, path + ": no such evaluation set (expected a BEIR folder, or a JSONL/CSV file of "
                                        "scored pairs or pairs)");
  if (fs::is_directory(st)) return EvalSetKind::beir_retrieval;
  RecordReaderOptions o = file_options(path, options);
  std::vector<std::string> fields = first_record_fields(o);
  if (fields.size() == 1 && fields[0].empty()) fields.clear();  // CSV / TSV: an empty first line
  if (fields.empty()) {
    // No fields: an empty file, or a first record that is not a JSON object; the reader says which line.
    o.text_field = "_";
    RecordReader reader(o);
    InputRecord rec;
    if (!reader.next(rec)) throw Error(Errc::invalid_argument, path + ": no records (an empty evaluation set)");
    // ("_" itself missing means a record that is an object without fields: said below.)
    if (!rec.error.empty() && rec.error.find("\"_\"") == std::string::npos)
      throw Error(Errc::format, describe_bad_record(reader, rec));
  }
  if (has(fields, options.sentence1_field) && has(fields, options.sentence2_field) && has(fields, options.score_field))
    return EvalSetKind::scored_pairs;
  if (has(fields, options.anchor_field) && has(fields, options.positive_field)) return EvalSetKind::pairs_retrieval;
  throw Error(Errc::invalid_argument,
              path + ": not an evaluation set stoke knows: its first record has " + joined(fields) +
                  "; expected " + options.sentence1_field + ", " + options.sentence2_field + ", " +
                  options.score_field + " (scored pairs) or " + options.anchor_field + ", " + options.positive_field +
                  " (pairs, evaluated as retrieval), or a BEIR folder");
}

EvalSet read_eval_set(const std::string& path, const EvalSetOptions& options) {
  EvalSet s;
  s.kind = detect_eval_set_kind(path, options);
  switch (s.kind) {
    case EvalSetKind::beir_retrieval: s.retrieval = read_beir_eval_set(path, options); break;
    case EvalSetKind::scored_pairs: s.pairs = read_scored_pairs_eval_set(path, options); break;
    case EvalSetKind::pairs_retrieval: s.retrieval = read_pairs_retrieval_eval_set(path, options); break;
  }
  return s;
}

}  // namespace stoke::train
