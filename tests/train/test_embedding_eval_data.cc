// Evaluation sets of embedding models (train/embedding_eval_data.h): a BEIR
// folder, scored pairs and pairs read as retrieval, the kind told from the
// path, and every bad input refused with file:line and the field.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fixtures.h"
#include "train/embedding_eval_data.h"

namespace stoke::train {
namespace {

namespace fs = std::filesystem;

fs::path write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary) << text;
  return p;
}

// A small BEIR folder; the parts can be replaced to make it bad.
struct Beir {
  std::string corpus =
      "{\"_id\": \"d2\", \"title\": \"Cats\", \"text\": \"Cats purr. \"}\n"
      "{\"_id\": \"d10\", \"text\": \"  Dogs bark.\\u3000\"}\n"
      "{\"_id\": \"d1\", \"title\": \"\", \"text\": \"Fish swim.\"}\n"
      "\n"
      "{\"_id\": 7, \"title\": null, \"text\": \"\"}\n";
  std::string queries =
      "{\"_id\": \"q1\", \"text\": \" What purrs?\"}\n"
      "{\"_id\": \"q2\", \"text\": \"What barks?\"}\n"
      "{\"_id\": \"q3\", \"text\": \"Unjudged\"}\n"
      "{\"_id\": \"q4\", \"text\": \"Judged, nothing relevant\"}\n";
  std::string qrels =
      "query-id\tcorpus-id\tscore\n"
      "q1\td2\t1\n"
      "q2\td10\t2\n"
      "q2\td1\t1\n"
      "q4\td1\t0\n"
      "q1\t7\t0\n";

  fs::path make(const std::string& name, const std::string& qrels_name = "test.tsv") const {
    const fs::path dir = test::scratch_dir("eval-data-" + name);
    write(dir / "corpus.jsonl", corpus);
    write(dir / "queries.jsonl", queries);
    write(dir / "qrels" / qrels_name, qrels);
    return dir;
  }
};

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_HAS(text, part) EXPECT_NE(std::string(text).find(part), std::string::npos) << (text)

TEST(EmbeddingEvalData, BeirFolder) {
  const fs::path dir = Beir{}.make("good");
  EXPECT_EQ(detect_eval_set_kind(dir.string()), EvalSetKind::beir_retrieval);
  const EvalSet e = read_eval_set(dir.string());
  ASSERT_EQ(e.kind, EvalSetKind::beir_retrieval);
  const RetrievalEvalSet& s = e.retrieval;
  EXPECT_EQ(s.qrels_path, (dir / "qrels" / "test.tsv").string());
  EXPECT_EQ(s.corpus_ids, (std::vector<std::string>{"d2", "d10", "d1", "7"}));
  // BEIR's (title + " " + text).strip(), Python's whitespace (U+3000 included); no title: text stripped.
  EXPECT_EQ(s.corpus, (std::vector<std::string>{"Cats Cats purr.", "Dogs bark.", "Fish swim.", ""}));
  // Queries as written; q3 (no judgement) and q4 (only score 0) left out.
  EXPECT_EQ(s.query_ids, (std::vector<std::string>{"q1", "q2"}));
  EXPECT_EQ(s.queries, (std::vector<std::string>{" What purrs?", "What barks?"}));
  EXPECT_EQ(s.queries_left_out, 2u);
  EXPECT_EQ(s.relevant, (std::vector<std::vector<uint32_t>>{{0}, {1, 2}}));
  // Ascending id order "7" < "d1" < "d10" < "d2" (strings, as ST compares them).
  EXPECT_EQ(s.corpus_tie_rank, (std::vector<uint32_t>{3, 2, 1, 0}));
  EXPECT_EQ(s.replaced_utf8, 0u);
}

TEST(EmbeddingEvalData, BeirQrelsChoiceAndPositionalColumns) {
  Beir b;
  // dev.tsv when there is no test.tsv; columns by position when the header names others.
  b.qrels = "qid\tdocid\trel\nq1\td1\t1\n";
  const fs::path dev = b.make("dev", "dev.tsv");
  RetrievalEvalSet s = read_beir_eval_set(dev.string());
  EXPECT_EQ(s.qrels_path, (dev / "qrels" / "dev.tsv").string());
  EXPECT_EQ(s.relevant, (std::vector<std::vector<uint32_t>>{{2}}));
  // test.tsv wins over dev.tsv; a named split wins over both.
  write(dev / "qrels" / "test.tsv", "query-id\tcorpus-id\tscore\nq2\td2\t1\n");
  EXPECT_EQ(read_beir_eval_set(dev.string()).query_ids, (std::vector<std::string>{"q2"}));
  EvalSetOptions o;
  o.qrels_split = "dev";
  EXPECT_EQ(read_beir_eval_set(dev.string(), o).query_ids, (std::vector<std::string>{"q1"}));
  o.qrels_split = "train";
  EXPECT_HAS(error_of([&] { read_beir_eval_set(dev.string(), o); }), "qrels/train.tsv: no such qrels file");
  // The only .tsv of another name; two of them is a question to the user.
  const fs::path other = Beir{}.make("other", "validation.tsv");
  EXPECT_EQ(read_beir_eval_set(other.string()).qrels_path, (other / "qrels" / "validation.tsv").string());
  write(other / "qrels" / "extra.tsv", "query-id\tcorpus-id\tscore\n");
  EXPECT_HAS(error_of([&] { read_beir_eval_set(other.string()); }), "2 other .tsv files");
}

TEST(EmbeddingEvalData, InvalidUtf8IsReplacedAndCounted) {
  Beir b;
  b.queries = "{\"_id\": \"q1\", \"text\": \"caf\xE9\"}\n{\"_id\": \"q2\", \"text\": \"x\"}\n"
              "{\"_id\": \"q4\", \"text\": \"y\"}\n";
  const RetrievalEvalSet s = read_beir_eval_set(b.make("utf8").string());
  EXPECT_EQ(s.queries[0], "caf\xEF\xBF\xBD");
  EXPECT_EQ(s.replaced_utf8, 1u);
}

TEST(EmbeddingEvalData, BadBeirFoldersNameFileLineAndField) {
  {
    const fs::path dir = Beir{}.make("no-corpus");
    fs::remove(dir / "corpus.jsonl");
    EXPECT_HAS(error_of([&] { read_eval_set(dir.string()); }), (dir / "corpus.jsonl").string() + ": missing");
  }
  {
    const fs::path dir = Beir{}.make("no-qrels");
    fs::remove_all(dir / "qrels");
    EXPECT_HAS(error_of([&] { read_eval_set(dir.string()); }), "no qrels (expected qrels/test.tsv");
  }
  Beir b;
  b.corpus = "{\"_id\": \"d1\", \"text\": \"a\"}\n{\"_id\": \"d2\", \"text\": \"b\"\n";
  fs::path dir = b.make("bad-json");
  EXPECT_HAS(error_of([&] { read_eval_set(dir.string()); }), (dir / "corpus.jsonl").string() + ":2: not valid JSON");

  b = Beir{};
  b.corpus = "{\"_id\": \"d1\", \"text\": \"a\"}\n{\"_id\": \"d2\", \"body\": \"b\"}\n";
  dir = b.make("no-text");
  EXPECT_HAS(error_of([&] { read_eval_set(dir.string()); }), "corpus.jsonl:2: field \"text\" is missing");

  b = Beir{};
  b.queries = "{\"text\": \"no id\"}\n";
  dir = b.make("no-id");
  const std::string no_id = error_of([&] { read_eval_set(dir.string()); });
  EXPECT_HAS(no_id, "queries.jsonl:1: field \"_id\" is missing");
  EXPECT_EQ(no_id.find("--id-field"), std::string::npos) << no_id;  // not a flag of this file

  b = Beir{};
  b.queries = "{\"_id\": [1], \"text\": \"x\"}\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("array-id").string()); }),
             "queries.jsonl:1: field \"_id\": expected a string id, found array");

  b = Beir{};
  b.corpus = "{\"_id\": \"d1\", \"text\": \"a\"}\n{\"_id\": \"d2\", \"text\": \"b\"}\n\n"
             "{\"_id\": \"d1\", \"text\": \"c\"}\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("dup-doc").string()); }),
             "corpus.jsonl:4: duplicate _id \"d1\" (also on line 1)");

  b = Beir{};
  b.queries = "{\"_id\": \"q1\", \"text\": \"a\"}\n{\"_id\": \"q1\", \"text\": \"b\"}\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("dup-query").string()); }),
             "queries.jsonl:2: duplicate _id \"q1\" (also on line 1)");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\nq1\td2\t1\nq9\td2\t1\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("unknown-query").string()); }),
             "test.tsv:3: field \"query-id\": query id \"q9\" is not in");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\nq1\td2\t1\nq1\td99\t1\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("unknown-doc").string()); }),
             "test.tsv:3: field \"corpus-id\": corpus id \"d99\" is not in");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\nq1\td2\t1\nq2\td1\t1\nq1\td2\t0\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("dup-judgement").string()); }),
             "test.tsv:4: query \"q1\" and document \"d2\" are judged twice (also on line 2)");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\nq1\td2\thigh\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("bad-score").string()); }),
             "test.tsv:2: field \"score\": expected a number");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\nq1\td2\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("short-row").string()); }), "test.tsv:2: expected 3 fields");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\nq1\td2\t0\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("none-relevant").string()); }),
             "no query has a judgement with score > 0");

  b = Beir{};
  b.qrels = "query-id\tcorpus-id\tscore\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("no-judgements").string()); }), "no judgements");

  b = Beir{};
  b.corpus = "\n";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("empty-corpus").string()); }), "corpus.jsonl: no documents");

  b = Beir{};
  b.queries = "";
  EXPECT_HAS(error_of([&] { read_eval_set(b.make("empty-queries").string()); }), "queries.jsonl: no queries");
}

TEST(EmbeddingEvalData, PairsAsRetrieval) {
  const fs::path dir = test::scratch_dir("eval-data-pairs");
  const fs::path p = write(dir / "pairs.jsonl",
                           "{\"anchor\": \"a1\", \"positive\": \"p1\", \"negative\": \"n1\", \"negative_2\": \"p2\"}\n"
                           "{\"anchor\": \"a2\", \"positive\": \"p2\", \"negative\": \"n1\", \"negative_2\": \"n2\"}\n"
                           "{\"anchor\": \"a1\", \"positive\": \"p3\", \"negative\": \"n1\", "
                           "\"negative_2\": \"n2\"}\n");
  EXPECT_EQ(detect_eval_set_kind(p.string()), EvalSetKind::pairs_retrieval);
  const EvalSet e = read_eval_set(p.string());
  ASSERT_EQ(e.kind, EvalSetKind::pairs_retrieval);
  const RetrievalEvalSet& s = e.retrieval;
  // a1 twice is one query, relevant to both its positives; corpus: distinct texts, first appearance.
  EXPECT_EQ(s.queries, (std::vector<std::string>{"a1", "a2"}));
  EXPECT_EQ(s.query_ids, (std::vector<std::string>{"0", "1"}));
  EXPECT_EQ(s.corpus, (std::vector<std::string>{"p1", "n1", "p2", "n2", "p3"}));
  EXPECT_EQ(s.relevant, (std::vector<std::vector<uint32_t>>{{0, 4}, {2}}));
  EXPECT_EQ(s.corpus_tie_rank, (std::vector<uint32_t>{0, 1, 2, 3, 4}));

  // CSV with named columns and no negatives.
  const fs::path c = write(dir / "pairs.csv", "question,answer\nq,\"x, y\"\nr,z\n");
  EvalSetOptions o;
  o.anchor_field = "question";
  o.positive_field = "answer";
  const EvalSet ec = read_eval_set(c.string(), o);
  ASSERT_EQ(ec.kind, EvalSetKind::pairs_retrieval);
  EXPECT_EQ(ec.retrieval.corpus, (std::vector<std::string>{"x, y", "z"}));
  EXPECT_EQ(ec.retrieval.relevant, (std::vector<std::vector<uint32_t>>{{0}, {1}}));

  const fs::path bad = write(dir / "bad.jsonl", "{\"anchor\": \"a\", \"positive\": \"b\"}\n{\"anchor\": \"c\"}\n");
  EXPECT_HAS(error_of([&] { read_eval_set(bad.string()); }), "bad.jsonl:2: field \"positive\" is missing");
}

TEST(EmbeddingEvalData, ScoredPairs) {
  const fs::path dir = test::scratch_dir("eval-data-scored");
  const fs::path p = write(dir / "sts.jsonl",
                           "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": 0.5}\n"
                           "{\"sentence1\": \"c\", \"sentence2\": \"d\", \"score\": 4, \"extra\": 1}\n");
  EXPECT_EQ(detect_eval_set_kind(p.string()), EvalSetKind::scored_pairs);
  const EvalSet e = read_eval_set(p.string());
  ASSERT_EQ(e.kind, EvalSetKind::scored_pairs);
  EXPECT_EQ(e.pairs.sentences1, (std::vector<std::string>{"a", "c"}));
  EXPECT_EQ(e.pairs.sentences2, (std::vector<std::string>{"b", "d"}));
  EXPECT_EQ(e.pairs.scores, (std::vector<double>{0.5, 4}));

  const fs::path c = write(dir / "sts.csv", "s1,s2,sim\nx,y,1.25\nz,w,0\n");
  EvalSetOptions o;
  o.sentence1_field = "s1";
  o.sentence2_field = "s2";
  o.score_field = "sim";
  const EvalSet ec = read_eval_set(c.string(), o);
  ASSERT_EQ(ec.kind, EvalSetKind::scored_pairs);
  EXPECT_EQ(ec.pairs.scores, (std::vector<double>{1.25, 0}));
  // A CSV without the named score column: the header's columns, no embed flag names.
  const fs::path nosim = write(dir / "nosim.csv", "s1,s2,score\nx,y,1\n");
  const std::string h = error_of([&] { read_scored_pairs_eval_set(nosim.string(), o); });
  EXPECT_HAS(h, "nosim.csv: the header has no column \"sim\"; its columns are: \"s1\", \"s2\", \"score\"");
  EXPECT_EQ(h.find("--label-field"), std::string::npos) << h;

  const fs::path bad = write(dir / "bad-score.jsonl",
                             "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": 1}\n"
                             "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": \"high\"}\n");
  EXPECT_HAS(error_of([&] { read_eval_set(bad.string()); }),
             "bad-score.jsonl:2: field \"score\" (the pair's gold score): expected a finite number, found \"high\"");
  const fs::path missing = write(dir / "no-score.jsonl",
                                 "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": 1}\n"
                                 "{\"sentence1\": \"a\", \"sentence2\": \"b\"}\n");
  const std::string m = error_of([&] { read_eval_set(missing.string()); });
  EXPECT_HAS(m, "no-score.jsonl:2: field \"score\" is missing (expected a number)");
  const fs::path one = write(dir / "one.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": 1}\n");
  EXPECT_HAS(error_of([&] { read_eval_set(one.string()); }), "1 scored pairs (correlations need at least 2)");
}

TEST(EmbeddingEvalData, KindDetectionRefusals) {
  const fs::path dir = test::scratch_dir("eval-data-kind");
  EXPECT_HAS(error_of([&] { read_eval_set((dir / "nope.jsonl").string()); }), "nope.jsonl: no such evaluation set");
  const fs::path other = write(dir / "other.jsonl", "{\"text\": \"a\", \"label\": 1}\n");
  const std::string e = error_of([&] { read_eval_set(other.string()); });
  EXPECT_HAS(e, "its first record has \"text\", \"label\"");
  EXPECT_HAS(e, "sentence1, sentence2, score (scored pairs) or anchor, positive");
  const fs::path empty = write(dir / "empty.jsonl", "\n\n");
  EXPECT_HAS(error_of([&] { read_eval_set(empty.string()); }), "empty.jsonl: no records");
  const fs::path empty_csv = write(dir / "empty.csv", "");
  EXPECT_HAS(error_of([&] { read_eval_set(empty_csv.string()); }), "empty.csv: no records");
  const fs::path bad = write(dir / "bad.jsonl", "\n[1, 2]\n");
  EXPECT_HAS(error_of([&] { read_eval_set(bad.string()); }), "bad.jsonl:2: expected a JSON object, found array");
  const fs::path txt = write(dir / "lines.txt", "a\nb\n");
  EXPECT_HAS(error_of([&] { read_eval_set(txt.string()); }), "lines.txt: a plain text file has no fields");
  const fs::path header_only = write(dir / "header.csv", "anchor,positive\n");
  EXPECT_HAS(error_of([&] { read_eval_set(header_only.string()); }), "header.csv: no records");
}

}  // namespace
}  // namespace stoke::train
