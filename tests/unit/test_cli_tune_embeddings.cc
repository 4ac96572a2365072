// What `stoke tune` reads back from a trial's output folder: the vectors as
// written, whether embed wrote f32 or f16 shards (--output-dtype f16 used to be
// read as f32: pairs of halves taken for floats, and reads past the data).
// And what tune does with precision: it never changes the vector space unless
// --try-precisions names the precision (it once wrote int8 into tuned.json on
// its own, measured against bf16), every precision tried is measured against
// f32 as int8's own report measures it, and a stop between trials ends the
// search with the table of the trials completed and, once the starting point
// completed, the best of them written. And that tune's knobs are the jobs'
// table entries: what tuned.json holds reads back through the same entries.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/file_util.h"
#include "core/half.h"
#include "cpu/kernels.h"
#include "io/npy.h"
#include "jobs/tune_embeddings.h"
#include "jobs/tune_job.h"
#include "jobs/tune_trials.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

fs::path embed(const fs::path& dir, const std::string& dtype) {
  const fs::path out = dir / dtype;
  const auto r = test::run_stoke("embed --model " + test::fixture("models/tiny-bert").string() + " --input " +
                                 test::fixture("golden/texts.jsonl").string() + " --shard-size 3 --quiet --output " +
                                 out.string() + " --output-dtype " + dtype);
  EXPECT_EQ(r.status, 0) << r.err;
  return out;
}

TEST(TuneEmbeddings, F16ShardsReadAsTheirValues) {
  const fs::path dir = test::scratch_dir("tune-embeddings-f16");
  int64_t d32 = 0, d16 = 0;
  const std::vector<float> f32 = read_output_embeddings(embed(dir, "f32"), &d32);
  const std::vector<float> f16v = read_output_embeddings(embed(dir, "f16"), &d16);
  ASSERT_GT(d32, 0);
  EXPECT_EQ(d16, d32);
  ASSERT_EQ(f16v.size(), f32.size()) << "every row of every shard, once";
  ASSERT_TRUE(fs::exists(dir / "f16" / "embeddings-00001.npy")) << "the test needs more than one shard";
  // Each f16 value is its f32 value rounded to half precision, exactly.
  for (size_t i = 0; i < f32.size(); ++i) ASSERT_EQ(f16v[i], to_float(to_f16(f32[i]))) << "element " << i;
  const CosineAgreement q = cosine_agreement(f32, f16v, d32);
  EXPECT_EQ(q.rows, f32.size() / static_cast<size_t>(d32));
  EXPECT_LT(q.mean_gap, 1e-5);
  EXPECT_GT(q.worst, 1 - 1e-5);
}

TEST(TuneEmbeddings, OtherElementTypesAndShortFilesAreRefused) {
  const fs::path dir = test::scratch_dir("tune-embeddings-bad");
  const std::string header = npy_header(DType::f32, 2, 4);
  auto write = [&](const fs::path& folder, const std::string& bytes) {
    fs::create_directories(folder);
    std::FILE* f = std::fopen((folder / "embeddings-00000.npy").c_str(), "wb");
    std::fwrite(bytes.data(), 1, bytes.size(), f);
    std::fclose(f);
  };
  write(dir / "short", header + std::string(8 * 4 - 1, '\0'));
  int64_t dims = 0;
  EXPECT_THROW(read_output_embeddings(dir / "short", &dims), Error);
  std::string f8 = header;
  f8.replace(f8.find("<f4"), 3, "<f8");
  write(dir / "f8", f8 + std::string(8 * 8, '\0'));
  EXPECT_THROW(read_output_embeddings(dir / "f8", &dims), Error);
}

TEST(TuneEmbeddings, NanRowsAgreeWithNothing) {
  const std::vector<float> a = {1, 0, 0, 1}, c = {1, 0, NAN, 1};
  const CosineAgreement q = cosine_agreement(a, c, 2);
  EXPECT_EQ(q.rows, 2u);
  EXPECT_EQ(q.worst, -1);
}

// Centered cosine (the int8 gate): anisotropic vectors that share one large
// direction agree by raw cosine even when what tells them apart is lost;
// after removing the reference's mean vector they do not.
TEST(TuneEmbeddings, CenteredCosineSeesWhatRawCosineHides) {
  // Reference rows: 10 + small differences; candidate: the same large part,
  // its differences replaced by noise of the same size.
  const std::vector<float> a = {10, 1, 0, 10, 0, 1, 10, -1, 0, 10, 0, -1};
  const std::vector<float> c = {10, 0, 1, 10, -1, 0, 10, 0, -1, 10, 1, 0};
  const CosineAgreement q = cosine_agreement(a, c, 3);
  EXPECT_EQ(q.rows, 4u);
  EXPECT_GT(q.worst, 0.99);                 // raw: looks fine
  EXPECT_NEAR(q.centered_mean, 0.0, 1e-9);  // centered: the differences are unrelated
  EXPECT_LE(q.centered_worst, q.centered_mean);
  const CosineAgreement same = cosine_agreement(a, a, 3);
  EXPECT_NEAR(same.centered_mean, 1.0, 1e-12);
  EXPECT_NEAR(same.centered_worst, 1.0, 1e-12);
}

// The worst centered cosine is one text's: one row turned around while the
// others are exact gives a mean near 1 and a worst of -1.
TEST(TuneEmbeddings, CenteredWorstIsTheWorstText) {
  const std::vector<float> a = {3, 1, 1, 3, 2, 2, 0, 4, 1, 1, 4, 0};
  std::vector<float> c = a;
  // Row 2 mirrored through the reference's mean vector: centered, it points the other way.
  const double mean[4] = {(3 + 2 + 1) / 3.0, (1 + 2 + 1) / 3.0, (1 + 0 + 4) / 3.0, (3 + 4 + 0) / 3.0};
  for (int k = 0; k < 4; ++k) c[8 + k] = static_cast<float>(2 * mean[k] - a[8 + k]);
  const CosineAgreement q = cosine_agreement(a, c, 4);
  EXPECT_EQ(q.rows, 3u);
  EXPECT_NEAR(q.centered_worst, -1.0, 1e-6);
  EXPECT_NEAR(q.centered_mean, (1 + 1 - 1) / 3.0, 1e-6);
}

// ---- precision: never changed unless named, always measured against f32 ----

TEST(TuneEmbeddings, QualityIsSaidAsInt8sReportSaysIt) {
  CosineAgreement q;
  q.rows = 66;
  q.centered_mean = 0.99944;
  q.centered_worst = 0.99871;
  q.worst = 0.999981;
  EXPECT_EQ(quality_vs_f32(q), "vs f32 over 66 texts: centered cosine mean 0.9994, min 0.9987 (raw cosine min 0.99998)");
  q.rows = 1;
  EXPECT_EQ(quality_vs_f32(q), "vs f32 over 1 text: centered cosine mean 0.9994, min 0.9987 (raw cosine min 0.99998)");
  EXPECT_EQ(quality_vs_f32(CosineAgreement{}),
            "vs f32: no rows to compare (no window of texts finished within a trial: a smaller --sort-window or a "
            "longer --seconds-per-trial gives some)");
}

// Short trials on the 66 golden texts (every trial finishes its one window,
// so every trial writes all 66 rows), tokenizer workers fixed at one.
struct TuneRun {
  std::atomic<bool> stop{false};
  TuneOptions o;
  explicit TuneRun(const fs::path& dir) {
    o.embed.common.model = test::fixture("models/tiny-bert").string();
    o.embed.common.input = test::fixture("golden/texts.jsonl").string();
    o.embed.common.device = "cpu";
    o.seconds_per_trial = 0.05;
    o.max_workers = 1;
    o.write_config = (dir / "tuned.json").string();
    o.cancel = &stop;
  }
};

// The table's line whose first words are `start` ("  precision      bf16, int8"), or "".
std::string table_line(const std::string& table, const std::string& start) {
  const size_t at = table.find("\n" + start);
  if (at == std::string::npos) return "";
  return table.substr(at + 1, table.find('\n', at + 1) - at - 1);
}

// The precisions that could be faster on this CPU: the ones tune names as not tried.
std::vector<std::string> lossy_here() {
  std::vector<std::string> p;
  if (cpu::cpu_has_native_bf16()) p.push_back("bf16");
  if (cpu::cpu_has_int8_dot()) p.push_back("int8");
  return p;
}

TEST(TuneEmbeddings, AnotherPrecisionIsNotTriedUnlessNamed) {
  const fs::path dir = test::scratch_dir("tune-precision-kept");
  TuneRun run(dir);
  const TuneResult r = run_tune(run.o);
  EXPECT_FALSE(r.interrupted);
  const nlohmann::json config = nlohmann::json::parse(read_file(dir / "tuned.json"));
  EXPECT_EQ(config["precision"], "f32") << r.table;
  for (const TuneTrial& t : r.trials)
    if (t.knob == "precision") EXPECT_EQ(t.texts_per_second, 0) << t.value << ": raced without --try-precisions";
  const std::vector<std::string> lossy = lossy_here();
  const std::string line = table_line(r.table, "  precision");
  if (lossy.size() == 2) {
    EXPECT_EQ(line, "  precision      bf16, int8                                    -          -       not tried: they "
                    "change every vector; --try-precisions bf16,int8 lets tune race them, with their quality measured "
                    "against f32")
        << r.table;
  } else if (lossy.size() == 1) {
    EXPECT_EQ(line, "  precision      " + lossy[0] + std::string(39 - lossy[0].size(), ' ') +
                        "        -          -       not tried: it changes every vector; --try-precisions " + lossy[0] +
                        " lets tune race it, with its quality measured against f32")
        << r.table;
  } else {
    EXPECT_EQ(line, "") << "this CPU speeds up no other precision: nothing to name";
  }
}

// The vectors of an embed with `precision` and tune's trial settings.
std::vector<float> embed_rows(const fs::path& dir, const std::string& precision, int64_t* dims) {
  EmbedOptions e;
  e.common.model = test::fixture("models/tiny-bert").string();
  e.common.input = test::fixture("golden/texts.jsonl").string();
  e.common.device = "cpu";
  e.common.workers = 1;
  e.common.quiet = true;
  e.common.precision = parse_precision("--precision", precision);
  e.int8_quality_sample = false;
  e.output = (dir / precision).string();
  run_embed(e);
  return read_output_embeddings(dir / precision, dims);
}

TEST(TuneEmbeddings, NamedPrecisionsAreRacedAndMeasuredAgainstF32) {
  const fs::path dir = test::scratch_dir("tune-precision-named");
  TuneRun run(dir);
  run.o.try_precisions = {"bf16", "int8"};
  const TuneResult r = run_tune(run.o);
  EXPECT_EQ(r.table.find("vs bf16"), std::string::npos) << r.table;
  int64_t dims = 0;
  const std::vector<float> f32 = embed_rows(dir, "f32", &dims);
  for (const std::string p : {"bf16", "int8"}) {
    const std::string line = table_line(r.table, "  precision      " + p + " ");
    ASSERT_NE(line, "") << r.table;
    const bool here = p == "bf16" ? cpu::cpu_has_native_bf16() : cpu::cpu_has_int8_dot();
    if (!here) {
      EXPECT_NE(line.find("skipped: "), std::string::npos) << line;
      continue;
    }
    // The same rows as embed gives (all 66 texts in one batch, as in the
    // trials), compared with f32's exactly as the trial's note says.
    int64_t d = 0;
    const std::vector<float> rows = embed_rows(dir, p, &d);
    const std::string quality = quality_vs_f32(cosine_agreement(f32, rows, dims));
    EXPECT_NE(line.find("; " + quality), std::string::npos) << line << "\nexpected: " << quality;
  }
}

// Started from bf16, int8's reference is still f32: one f32 run is made for it.
TEST(TuneEmbeddings, FromALowerStartF32IsRunAsTheReference) {
  if (!cpu::cpu_has_native_bf16() || !cpu::cpu_has_int8_dot()) GTEST_SKIP() << "needs native bf16 and an int8 dot";
  const fs::path dir = test::scratch_dir("tune-precision-reference");
  TuneRun run(dir);
  run.o.embed.common.precision = Precision::bf16;
  run.o.try_precisions = {"int8"};
  const TuneResult r = run_tune(run.o);
  const std::string ref = table_line(r.table, "  precision      f32 (reference)");
  EXPECT_NE(ref.find(" the reference for the other precisions' quality (not a candidate)"), std::string::npos) << r.table;
  EXPECT_NE(table_line(r.table, "  precision      int8").find("; vs f32 over 66 texts: centered cosine mean "),
            std::string::npos)
      << r.table;
  // f32 was not named: a reference, not a candidate (going back to f32 changes the vectors too).
  const std::string f32_row = table_line(r.table, "  precision      f32   ");
  ASSERT_NE(f32_row.find("not tried"), std::string::npos) << r.table;
  EXPECT_EQ(f32_row.substr(f32_row.find("not tried")),
            "not tried: it changes every vector; --try-precisions f32 lets tune race it");
  EXPECT_NE(nlohmann::json::parse(read_file(dir / "tuned.json"))["precision"], "f32") << r.table;
}

TEST(TuneEmbeddings, TryPrecisionsTakesOnlyPrecisions) {
  TuneRun run(test::scratch_dir("tune-precision-bad"));
  run.o.try_precisions = {"bf16", "fp8"};
  try {
    run_tune(run.o);
    ADD_FAILURE() << "fp8 taken";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "--try-precisions \"fp8\": expected f32, bf16, f16 or int8");
  }
}

// ---- the knobs are table entries ------------------------------------------------

// train's winning settings as tune writes them: each knob's flag and the
// value its table entry shows, a number where the entry takes whole numbers
// (--lr-scale-from), text where it takes "auto" too (--batch-size); and the
// config, set back through the same entries, gives the same settings.
TEST(TuneConfig, KnobsAreTheJobsTableEntriesAndReadBack) {
  const tuning::Knob<TrainOptions> batch(train_option_table(), "--batch-size");
  const tuning::Knob<TrainOptions> lr_from(train_option_table(), "--lr-scale-from");
  const tuning::Knob<TrainOptions> precision(train_option_table(), "--precision");
  EXPECT_EQ(batch.name(), "batch-size");
  TrainOptions best;
  best.batch_size = 16;
  best.lr_scale_from = 4;
  best.common.precision = Precision::bf16;
  const tuning::TunedConfig c =
      tuning::tuned_config({batch.setting(best), lr_from.setting(best), precision.setting(best)});
  const nlohmann::json config = nlohmann::json::parse(c.json);
  EXPECT_EQ(config, nlohmann::json::parse(R"({"batch-size": "16", "lr-scale-from": 4, "precision": "bf16"})"));
  EXPECT_EQ(c.flags, "--batch-size 16 --lr-scale-from 4 --precision bf16");
  TrainOptions back;
  for (const auto& [key, value] : config.items()) {
    const std::string text = value.is_string() ? value.get<std::string>() : value.dump();  // as --config reads it
    find_option(train_option_table(), "--" + key)->set(back, text);
  }
  EXPECT_EQ(back.batch_size, 16);
  EXPECT_FALSE(back.batch_size_auto);
  EXPECT_EQ(back.lr_scale_from, 4);
  EXPECT_EQ(back.common.precision, Precision::bf16);
  // A knob its job's table does not show is a bug of ours, said at once.
  try {
    tuning::Knob<EmbedOptions>(embed_option_table(), "--batch-size");
    ADD_FAILURE() << "embed has no --batch-size";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::internal);
  }
}

// ---- a stop between trials ---------------------------------------------------

const char* kInterruptedHead = "stoke tune embed: one knob at a time, 0.05 s a trial (interrupted: the trials "
                               "completed before the stop)\n";

TEST(TuneEmbeddings, StopBeforeTheStartingPointWritesNothing) {
  const fs::path dir = test::scratch_dir("tune-stop-first");
  TuneRun run(dir);
  run.stop = true;
  const TuneResult r = run_tune(run.o);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.config_json, "");
  EXPECT_FALSE(fs::exists(dir / "tuned.json"));
  EXPECT_EQ(r.table.rfind(kInterruptedHead, 0), 0u) << r.table;
  EXPECT_EQ(table_line(r.table, "  start"),
            "  start          workers 1, batch-tokens 16384, f32            -          -       interrupted before it "
            "completed");
  const std::string last = "\ninterrupted before the starting point's trial completed: no settings found, nothing written\n";
  ASSERT_GE(r.table.size(), last.size());
  EXPECT_EQ(r.table.substr(r.table.size() - last.size()), last) << r.table;
}

TEST(TuneEmbeddings, StopAfterTheStartingPointWritesTheBestCompleted) {
  const fs::path dir = test::scratch_dir("tune-stop-second");
  TuneRun run(dir);
  int trials = 0;
  run.o.after_trial = [&] {
    if (++trials == 1) run.stop = true;  // as SIGTERM right after the starting point's trial
  };
  const TuneResult r = run_tune(run.o);
  EXPECT_EQ(trials, 1) << "no trial starts after the stop";
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.table.rfind(kInterruptedHead, 0), 0u) << r.table;
  EXPECT_NE(table_line(r.table, "  start").find("<- "), std::string::npos) << r.table;
  EXPECT_EQ(table_line(r.table, "  batch-tokens"),
            "  batch-tokens   32768                                         -          -       interrupted before the "
            "race decided: not taken");
  EXPECT_EQ(table_line(r.table, "  graphs"), "") << "the knobs after the stop are not listed";
  const std::string path = (dir / "tuned.json").string();
  EXPECT_NE(r.table.find("\ninterrupted: the best of the completed trials, written to " + path +
                         " (use: stoke embed --config " + path + " ...)\n"),
            std::string::npos)
      << r.table;
  const nlohmann::json config = nlohmann::json::parse(read_file(path));
  EXPECT_EQ(config, nlohmann::json::parse(R"({"workers": 1, "batch-tokens": 16384, "precision": "f32"})"));
  EXPECT_EQ(r.config_json, read_file(path));
}

TEST(TuneEmbeddings, StopWithoutWriteConfigPrintsTheBestCompleted) {
  TuneRun run(test::scratch_dir("tune-stop-print"));
  run.o.write_config.clear();
  run.o.after_trial = [&] { run.stop = true; };
  const TuneResult r = run_tune(run.o);
  EXPECT_TRUE(r.interrupted);
  EXPECT_NE(r.table.find("\ninterrupted: the best of the completed trials (save them with --write-config FILE, then "
                         "`stoke embed --config FILE ...`):\n{"),
            std::string::npos)
      << r.table;
}

TEST(TuneTrain, StopsBetweenTrialsAndWritesTheBestCompleted) {
  const fs::path dir = test::scratch_dir("tune-train-stop");
  {
    std::ofstream data(dir / "train.jsonl");
    for (int i = 0; i < 16; ++i)
      data << nlohmann::json{{"text", "text number " + std::to_string(i)}, {"label", i % 2 ? "odd" : "even"}}.dump()
           << "\n";
  }
  std::atomic<bool> stop{false};
  TuneTrainOptions o;
  o.train.common.model = test::fixture("models/tiny-bert").string();
  o.train.common.device = "cpu";
  o.train.train = (dir / "train.jsonl").string();
  o.train.batch_size = 4;
  o.train.max_batch_size = 16;
  o.steps_per_trial = 1;
  o.write_config = (dir / "tuned.json").string();
  o.cancel = &stop;
  int trials = 0;
  o.after_trial = [&] {
    if (++trials == 1) stop = true;
  };
  const TuneResult r = run_tune_train(o);
  EXPECT_EQ(trials, 1);
  EXPECT_TRUE(r.interrupted);
  EXPECT_EQ(r.table.rfind("stoke tune train: one knob at a time, 1 steps a trial (interrupted: the trials completed "
                          "before the stop)\n",
                          0),
            0u)
      << r.table;
  EXPECT_NE(r.table.find("\n  batch-size     8 (lr x2) "), std::string::npos) << r.table;
  EXPECT_NE(r.table.find("interrupted before the race decided: not taken\n"), std::string::npos) << r.table;
  const nlohmann::json config = nlohmann::json::parse(read_file(dir / "tuned.json"));
  EXPECT_EQ(config["batch-size"], "4") << config.dump();

  // Stopped before the starting point: nothing written.
  std::atomic<bool> stopped{true};
  o.cancel = &stopped;
  o.after_trial = nullptr;
  o.write_config = (dir / "none.json").string();
  const TuneResult none = run_tune_train(o);
  EXPECT_TRUE(none.interrupted);
  EXPECT_FALSE(fs::exists(dir / "none.json"));
  EXPECT_NE(none.table.find("\ninterrupted before the starting point's trial completed: no settings found, nothing "
                            "written\n"),
            std::string::npos)
      << none.table;
}

}  // namespace
}  // namespace stoke
