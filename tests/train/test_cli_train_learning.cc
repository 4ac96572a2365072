// A real learning test: language identification on the multilingual fortunes
// corpus (7 languages, ~14% majority class), from the tiny BERT with a
// re-initialised 7-way head, split by record id (id mod 10 == 0 is held out).
// The eval accuracy must reach 80% within 600 steps; the curve is printed.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "core/file_util.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

TEST(TrainLearning, LanguageIdReachesEightyPercentWithin600Steps) {
  const fs::path dir = test::scratch_dir("train-learning");
  std::ifstream in(test::fixture("corpus/fortunes-multilingual.jsonl"));
  std::ofstream train(dir / "train.jsonl"), eval(dir / "eval.jsonl");
  std::string line;
  int64_t n_train = 0, n_eval = 0;
  while (std::getline(in, line)) {
    const json r = json::parse(line);
    const int64_t id = r["id"].get<int64_t>();
    const json ex{{"text", r["text"]}, {"label", r["lang"]}};
    if (id % 10 == 0) {
      if (id % 30 == 0) {  // a third of the held-out records keeps the eval short
        eval << ex.dump() << "\n";
        ++n_eval;
      }
    } else if (id % 3 == 0) {  // every third of the rest: ~6,500 examples, more than 600 x 8 draws
      train << ex.dump() << "\n";
      ++n_train;
    }
  }
  train.close();
  eval.close();
  const fs::path out = dir / "run";
  const auto r = test::run_stoke("train --model " + test::fixture("models/tiny-bert").string() + " --train " +
                                 (dir / "train.jsonl").string() + " --eval " + (dir / "eval.jsonl").string() +
                                 " --output " + out.string() +
                                 " --max-steps 600 --batch-size 16 --lr 2e-3 --warmup-ratio 0.05 --max-length 64"
                                 " --log-every 100 --eval-every 100 --save-every 0 --quiet");
  ASSERT_EQ(r.status, 0) << r.err;
  std::ifstream log(out / "log.jsonl");
  double best = 0, last = 0;
  std::printf("language id: %lld train / %lld eval examples, 7 labels\n", static_cast<long long>(n_train),
              static_cast<long long>(n_eval));
  while (std::getline(log, line)) {
    const json l = json::parse(line);
    if (l.contains("eval_accuracy")) {
      last = l["eval_accuracy"].get<double>();
      best = std::max(best, last);
      std::printf("  step %4lld  eval accuracy %.3f  macro-F1 %.3f  eval loss %.3f\n",
                  static_cast<long long>(l["step"].get<int64_t>()), last, l["eval_macro_f1"].get<double>(),
                  l["eval_loss"].get<double>());
    } else if (l.contains("loss")) {
      std::printf("  step %4lld  train loss %.3f  train accuracy %.3f\n", static_cast<long long>(l["step"].get<int64_t>()),
                  l["loss"].get<double>(), l["accuracy"].get<double>());
    }
  }
  EXPECT_GE(last, 0.80) << "final eval accuracy " << last << " (best " << best << ")";
  const json config = json::parse(read_file(out / "config.json"));
  EXPECT_EQ(config["id2label"].size(), 7u);
}

}  // namespace
}  // namespace stoke
