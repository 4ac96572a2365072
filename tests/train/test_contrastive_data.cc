// Contrastive training data (train/contrastive_data.h): named columns read
// from JSONL and CSV, distinct texts kept once, refusals that name the
// objective and the file's columns, bad records with file:line, and the
// no-duplicates batches of sentence-transformers' sampler.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "support/fixtures.h"
#include "train/contrastive_data.h"

namespace stoke::train {
namespace {

namespace fs = std::filesystem;

fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = test::scratch_dir("contrastive-data") / name;
  std::ofstream(p) << text;
  return p;
}

RecordReaderOptions options_for(const fs::path& p) {
  RecordReaderOptions o;
  o.path = p.string();
  return o;
}

std::string error_of(const RecordReaderOptions& o, const ContrastiveColumns& c, Objective obj) {
  try {
    read_contrastive_dataset(o, c, obj, false);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(ContrastiveData, TripletsShareTextsAndFindTheirNegatives) {
  const fs::path p = write("triplets.jsonl",
                           "{\"anchor\": \"a\", \"positive\": \"b\", \"negative\": \"c\", \"negative_2\": \"d\"}\n"
                           "\n"
                           "{\"anchor\": \"e\", \"positive\": \"b\", \"negative\": \"a\", \"negative_2\": \"f\"}\n");
  const ContrastiveDataset d = read_contrastive_dataset(options_for(p), {}, Objective::mnrl, false);
  EXPECT_EQ(d.columns, (std::vector<std::string>{"anchor", "positive", "negative", "negative_2"}));
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_EQ(d.texts.size(), 6u);  // a b c d e f: "b" and "a" are kept once
  EXPECT_EQ(d.examples[1].texts[1], d.examples[0].texts[1]);
  EXPECT_EQ(d.examples[1].texts[2], d.examples[0].texts[0]);
  EXPECT_EQ(d.examples[1].record, 1u);
  EXPECT_FALSE(d.sha256.empty());
}

TEST(ContrastiveData, NamedColumnsAndScoredPairsFromCsv) {
  const fs::path p = write("pairs.csv", "s1,s2,sim\nfirst,second,0.5\n\"third, quoted\",fourth,1\n");
  ContrastiveColumns c;
  c.anchor = "s1";
  c.positive = "s2";
  c.score = "sim";
  const ContrastiveDataset d = read_contrastive_dataset(options_for(p), c, Objective::cosent, false);
  ASSERT_EQ(d.examples.size(), 2u);
  EXPECT_FLOAT_EQ(d.examples[0].score, 0.5f);
  EXPECT_FLOAT_EQ(d.examples[1].score, 1.0f);
  EXPECT_EQ(d.texts[d.examples[1].texts[0]], "third, quoted");
  EXPECT_EQ(d.score_column, "sim");
}

TEST(ContrastiveData, AnObjectiveThatDoesNotFitTheColumnsNamesBoth) {
  const fs::path p = write("triplets-for-cosent.jsonl", "{\"anchor\": \"a\", \"positive\": \"b\"}\n");
  const std::string e = error_of(options_for(p), {}, Objective::cosent);
  EXPECT_NE(e.find("--objective cosent needs the columns sentence1, sentence2, score"), std::string::npos) << e;
  EXPECT_NE(e.find("has anchor, positive"), std::string::npos) << e;
  const fs::path q = write("scored-for-mnrl.jsonl", "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": 1}\n");
  const std::string f = error_of(options_for(q), {}, Objective::mnrl);
  EXPECT_NE(f.find("--objective mnrl needs the columns anchor, positive"), std::string::npos) << f;
  EXPECT_NE(f.find("--objective cosent or cosine-mse"), std::string::npos) << f;
}

TEST(ContrastiveData, BadRecordsNameTheLineOrAreSkipped) {
  const fs::path p = write("bad.jsonl",
                           "{\"sentence1\": \"a\", \"sentence2\": \"b\", \"score\": 0.1}\n"
                           "{\"sentence1\": \"c\", \"sentence2\": 7, \"score\": 0.2}\n"
                           "{\"sentence1\": \"d\", \"sentence2\": \"e\", \"score\": \"high\"}\n");
  const std::string e = error_of(options_for(p), {}, Objective::cosine_mse);
  EXPECT_NE(e.find("bad.jsonl:2"), std::string::npos) << e;
  EXPECT_NE(e.find("sentence2"), std::string::npos) << e;
  const ContrastiveDataset d = read_contrastive_dataset(options_for(p), {}, Objective::cosine_mse, true);
  EXPECT_EQ(d.examples.size(), 1u);
  ASSERT_EQ(d.bad.size(), 2u);
  EXPECT_EQ(d.bad[1].line, 3u);
  EXPECT_NE(d.bad[1].error.find("score"), std::string::npos) << d.bad[1].error;
}

TEST(ContrastiveData, AnEmptyFileIsRefused) {
  const fs::path p = write("empty.jsonl", "\n");
  EXPECT_NE(error_of(options_for(p), {}, Objective::mnrl).find("no training records"), std::string::npos);
}

// n pairs; pairs[i] = (anchor i, positive p[i]).
ContrastiveDataset pairs(const std::vector<std::pair<int, int>>& texts) {
  ContrastiveDataset d;
  d.columns = {"anchor", "positive"};
  int most = 0;
  for (auto [a, b] : texts) most = std::max({most, a, b});
  for (int i = 0; i <= most; ++i) d.texts.push_back("t" + std::to_string(i));
  for (auto [a, b] : texts) {
    ContrastiveExample e;
    e.texts = {static_cast<uint32_t>(a), static_cast<uint32_t>(b)};
    d.examples.push_back(e);
  }
  return d;
}

TEST(ContrastiveData, NoBatchHoldsATextTwiceAndNothingIsLost) {
  // File order: example 1 shares text 1 with example 0, so it waits for the
  // next batch and example 2 takes its place.
  const ContrastiveDataset d = pairs({{0, 1}, {2, 1}, {3, 4}, {5, 6}, {7, 6}, {8, 9}});
  const auto b = no_duplicate_batches(d, 2, false, 42, 0);
  ASSERT_EQ(b.size(), 3u);
  EXPECT_EQ(b[0], (std::vector<uint32_t>{0, 2}));
  EXPECT_EQ(b[1], (std::vector<uint32_t>{1, 3}));
  EXPECT_EQ(b[2], (std::vector<uint32_t>{4, 5}));
  for (uint64_t seed : {1u, 2u, 3u}) {
    const auto s = no_duplicate_batches(d, 3, true, seed, 1);
    std::multiset<uint32_t> seen;
    for (const auto& batch : s) {
      std::set<uint32_t> texts;
      for (uint32_t e : batch) {
        seen.insert(e);
        for (uint32_t t : d.examples[e].texts) EXPECT_TRUE(texts.insert(t).second) << "seed " << seed;
      }
    }
    EXPECT_EQ(seen.size(), d.examples.size());
    EXPECT_EQ(std::set<uint32_t>(seen.begin(), seen.end()).size(), d.examples.size());
    EXPECT_EQ(s, no_duplicate_batches(d, 3, true, seed, 1));  // a pure function of (seed, epoch)
  }
  EXPECT_NE(no_duplicate_batches(d, 3, true, 1, 0), no_duplicate_batches(d, 3, true, 1, 1));
}

}  // namespace
}  // namespace stoke::train
