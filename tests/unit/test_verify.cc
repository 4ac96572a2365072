// run_verify on synthetic output folders written from docs/output-format.md
// (tests/support/embed_output.h): a good set passes, and each way a set can be
// incomplete, inconsistent or damaged is named. The default job: 20 records
// over 3 tasks, shard_size 3, record 7 (task 1) bad and skipped, so
//   task 0: records 0 3 6 | 9 12 15 | 18      (3 shards, 7 rows)
//   task 1: records 1 4 10 | 13 16 19, 7 skipped (2 shards, 6 rows)
//   task 2: records 2 5 8 | 11 14 17          (2 shards, 6 rows)
#include <gtest/gtest.h>

#include <fstream>
#include <functional>

#include "core/file_util.h"
#include "jobs/verify_job.h"
#include "support/embed_output.h"
#include "support/fixtures.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::EmbedJob;

std::string all_of(const VerifyReport& r) {
  std::string s;
  for (const auto& p : r.problems) s += "  problem: " + p + "\n";
  for (const auto& n : r.notes) s += "  note: " + n + "\n";
  return s;
}

// True when one problem line contains every one of `parts`.
bool has_problem(const VerifyReport& r, std::initializer_list<std::string> parts) {
  for (const auto& p : r.problems) {
    bool all = true;
    for (const auto& part : parts) all = all && p.find(part) != std::string::npos;
    if (all) return true;
  }
  return false;
}

#define EXPECT_PROBLEM(report, ...) EXPECT_TRUE(has_problem(report, {__VA_ARGS__})) << all_of(report)

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << text;
}

void edit_manifest(const std::string& folder, const std::function<void(json&)>& change) {
  json m = test::read_manifest(folder);
  change(m);
  test::write_manifest(folder, m);
}

TEST(Verify, GoodSetPasses) {
  const auto folders = test::write_job(test::scratch_dir("verify-good"), EmbedJob{});
  const VerifyReport r = run_verify(folders);
  EXPECT_TRUE(r.problems.empty()) << all_of(r);
  EXPECT_TRUE(r.notes.empty()) << all_of(r);
  EXPECT_EQ(r.folders, 3u);
  EXPECT_EQ(r.tasks, 3u);
  EXPECT_EQ(r.records, 20u);
  EXPECT_EQ(r.rows, 19u);
  EXPECT_EQ(r.skipped, 1u);
}

TEST(Verify, GoodVariantsPass) {
  EmbedJob unsplit;  // one task, no bad records, the last shard short
  unsplit.count = 1;
  unsplit.bad = {};
  EmbedJob f16;  // f16 output, several bad records
  f16.output_dtype = "f16";
  f16.bad = {0, 7, 19};
  EmbedJob ids;  // ids from an id field: any JSON values
  ids.id_field = "id";
  EmbedJob many;  // more tasks than some tasks have records for
  many.records = 5;
  many.count = 8;
  many.bad = {};
  for (const auto& [name, job] : {std::pair{"unsplit", unsplit}, std::pair{"f16", f16}, std::pair{"ids", ids},
                                  std::pair{"many", many}}) {
    const auto folders = test::write_job(test::scratch_dir(std::string("verify-variant-") + name), job);
    const VerifyReport r = run_verify(folders);
    EXPECT_TRUE(r.problems.empty()) << name << "\n" << all_of(r);
    EXPECT_EQ(r.tasks, job.count) << name;
    EXPECT_EQ(r.rows + r.skipped, job.records) << name;
  }
}

TEST(Verify, MissingTask) {
  const auto folders = test::write_job(test::scratch_dir("verify-missing-task"), EmbedJob{});
  const VerifyReport r = run_verify({folders[0], folders[2]});
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_PROBLEM(r, "tasks: 1 of 3 missing", "task 1");
}

TEST(Verify, UnreadableManifestIsOneProblemAndNamedInTheMissingTasks) {
  const auto folders = test::write_job(test::scratch_dir("verify-unreadable"), EmbedJob{});
  write_text(fs::path(folders[1]) / "manifest.json", "{\"format\": \"stoke-embeddings\", ");
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[1] + ": manifest.json is not valid JSON");
  EXPECT_PROBLEM(r, "tasks: 1 of 3 missing", "1 folder could not be read");
  EXPECT_EQ(r.problems.size(), 2u) << all_of(r);  // nothing deeper about task-1's files
}

TEST(Verify, NotAnOutputFolder) {
  const fs::path root = test::scratch_dir("verify-not-output");
  fs::create_directories(root / "empty");
  write_text(root / "file", "x");
  const VerifyReport r = run_verify({(root / "empty").string(), (root / "file").string(), (root / "none").string()});
  EXPECT_PROBLEM(r, "empty: no manifest.json");
  EXPECT_PROBLEM(r, "file: is not a folder");
  EXPECT_PROBLEM(r, "none: no such folder");
  EXPECT_EQ(r.problems.size(), 3u) << all_of(r);
  EXPECT_FALSE(run_verify({}).problems.empty());
}

TEST(Verify, WrongFormatOrVersion) {
  const auto folders = test::write_job(test::scratch_dir("verify-format"), EmbedJob{});
  edit_manifest(folders[0], [](json& m) { m["format"] = "something-else"; });
  edit_manifest(folders[1], [](json& m) { m["format_version"] = 2; });
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": manifest.json: format is \"something-else\"");
  EXPECT_PROBLEM(r, folders[1] + ": manifest.json: format_version is 2");
}

TEST(Verify, MissingOrMistypedFieldsAreNamed) {
  const auto folders = test::write_job(test::scratch_dir("verify-fields"), EmbedJob{});
  edit_manifest(folders[0], [](json& m) {
    m["task"].erase("index");
    m["shards"][1]["rows"] = "3";
    m["counts"]["texts"] = -1;
  });
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": manifest.json: task.index is missing");
  EXPECT_PROBLEM(r, folders[0] + ": manifest.json: shards[1].rows is string, expected a non-negative integer");
  EXPECT_PROBLEM(r, folders[0] + ": manifest.json: counts.texts is a negative integer");
}

TEST(Verify, SameTaskInTwoFolders) {
  const fs::path root = test::scratch_dir("verify-same-task");
  auto folders = test::write_job(root, EmbedJob{});
  fs::copy(folders[1], root / "task-1-old", fs::copy_options::recursive);
  folders.push_back((root / "task-1-old").string());
  VerifyReport r = run_verify(folders);
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_PROBLEM(r, "task-1-old: holds task 1, and so does " + folders[1]);

  r = run_verify({folders[0], folders[1], folders[2], folders[1] + "/"});
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_PROBLEM(r, "is the same folder as " + folders[1] + " (given twice)");
}

TEST(Verify, MissingShardFile) {
  const auto folders = test::write_job(test::scratch_dir("verify-missing-shard"), EmbedJob{});
  fs::remove(fs::path(folders[0]) / "embeddings-00001.npy");
  fs::remove(fs::path(folders[2]) / "ids-00000.jsonl");
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 1 (embeddings-00001.npy): file is missing");
  EXPECT_PROBLEM(r, folders[2] + ": shard 0 (ids-00000.jsonl): file is missing");
  EXPECT_EQ(r.problems.size(), 2u) << all_of(r);
}

TEST(Verify, ShardListedTwice) {
  const auto folders = test::write_job(test::scratch_dir("verify-shard-twice"), EmbedJob{});
  edit_manifest(folders[0], [](json& m) {
    json& shards = m["shards"];
    shards.insert(shards.begin() + 2, shards[1]);  // 0, 1, 1, 2
  });
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 1 (embeddings-00001.npy): follows shard 1 in the manifest, expected shard 2");
  EXPECT_PROBLEM(r, folders[0] + ": shard 1 (embeddings-00001.npy): first_row is 3, expected 6", "overlap");
  // Reported where it happens, not again for shard 2 after it.
  for (const auto& p : r.problems) EXPECT_EQ(p.find("shard 2 ("), std::string::npos) << p;

  // A shard left out of the list.
  const auto folders2 = test::write_job(test::scratch_dir("verify-shard-left-out"), EmbedJob{});
  edit_manifest(folders2[0], [](json& m) { m["shards"].erase(1); });
  const VerifyReport r2 = run_verify(folders2);
  EXPECT_PROBLEM(r2, folders2[0] + ": shard 2 (embeddings-00002.npy): follows shard 0 in the manifest, expected shard 1");
  EXPECT_PROBLEM(r2, folders2[0] + ": embeddings-00001.npy: not committed");
}

TEST(Verify, OverlappingOrGappedFirstRow) {
  const auto folders = test::write_job(test::scratch_dir("verify-first-row"), EmbedJob{});
  edit_manifest(folders[0], [](json& m) { m["shards"][1]["first_row"] = 2; });
  edit_manifest(folders[2], [](json& m) { m["shards"][1]["first_row"] = 4; });
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 1", "first_row is 2, expected 3", "overlap");
  EXPECT_PROBLEM(r, folders[2] + ": shard 1", "first_row is 4, expected 3", "gap");
}

TEST(Verify, RecordRangesOfShards) {
  const auto folders = test::write_job(test::scratch_dir("verify-record-ranges"), EmbedJob{});
  // task 0's shard 1 claims to start at record 6, which shard 0 already holds.
  edit_manifest(folders[0], [](json& m) { m["shards"][1]["first_record"] = 6; });
  // task 2's shard 0 claims a last record of another task.
  edit_manifest(folders[2], [](json& m) { m["shards"][0]["last_record"] = 9; });
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 1", "first_record 6 is not after the previous shard");
  EXPECT_PROBLEM(r, folders[0] + ": shard 1 (ids-00001.jsonl): line 1: record 9, but the manifest's first_record is 6");
  EXPECT_PROBLEM(r, folders[2] + ": shard 0", "do not belong to task 2 of 3");
}

TEST(Verify, CorruptedShard) {
  const auto folders = test::write_job(test::scratch_dir("verify-corrupt"), EmbedJob{});
  const fs::path npy = fs::path(folders[2]) / "embeddings-00001.npy";
  std::string bytes = read_file(npy);
  bytes[bytes.size() - 5] ^= 0x01;  // a data byte: header, shape and size stay valid
  write_text(npy, bytes);
  const VerifyReport r = run_verify(folders);
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_EQ(r.problems[0], folders[2] + ": shard 1 (embeddings-00001.npy): sha256 does not match the manifest (file "
                                         "changed or corrupted)");
}

TEST(Verify, WrongNpyShapeDtypeOrSize) {
  const auto folders = test::write_job(test::scratch_dir("verify-npy"), EmbedJob{});
  const fs::path t0(folders[0]), t1(folders[1]), t2(folders[2]);
  test::write_embeddings(t0 / "embeddings-00000.npy", {0, 3, 6}, 5, "f32");  // 5 columns, not 4
  test::write_embeddings(t1 / "embeddings-00000.npy", {1, 4, 10}, 4, "f16");  // f16 in an f32 job
  std::string bytes = read_file(t2 / "embeddings-00000.npy");
  write_text(t2 / "embeddings-00000.npy", bytes.substr(0, bytes.size() - 4));  // torn
  bytes = read_file(t2 / "embeddings-00001.npy");
  write_text(t2 / "embeddings-00001.npy", "not a numpy file" + bytes);
  for (const auto& f : folders) test::rehash(f);
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 0 (embeddings-00000.npy): shape is [3, 5], expected [3, 4]");
  EXPECT_PROBLEM(r, folders[1] + ": shard 0 (embeddings-00000.npy): dtype is '<f2', expected '<f4'");
  EXPECT_PROBLEM(r, folders[2] + ": shard 0 (embeddings-00000.npy): file is", "truncated");
  EXPECT_PROBLEM(r, folders[2] + ": shard 1 (embeddings-00001.npy): not a valid .npy file", "magic");
  EXPECT_EQ(r.problems.size(), 4u) << all_of(r);
}

TEST(Verify, IdsWithDuplicatedOrMissingRecord) {
  const auto folders = test::write_job(test::scratch_dir("verify-ids"), EmbedJob{});
  write_text(fs::path(folders[0]) / "ids-00001.jsonl", "9\n9\n15\n");  // 12 replaced by 9
  write_text(fs::path(folders[2]) / "ids-00001.jsonl", "11\n17\n");    // 14 left out
  write_text(fs::path(folders[1]) / "ids-00001.jsonl", "13\n16\n\"x\"\n");  // not a record number
  for (const auto& f : folders) test::rehash(f);
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 1 (ids-00001.jsonl): line 2: record 9 is not after", "duplicated");
  EXPECT_PROBLEM(r, folders[2] + ": shard 1 (ids-00001.jsonl): has 2 lines, expected 3");
  EXPECT_PROBLEM(r, folders[1] + ": shard 1 (ids-00001.jsonl): line 3: not a record number");
}

TEST(Verify, IdsLinesMustBeJsonEvenWithAnIdField) {
  EmbedJob job;
  job.id_field = "id";
  const auto folders = test::write_job(test::scratch_dir("verify-ids-field"), job);
  write_text(fs::path(folders[0]) / "ids-00000.jsonl", "\"id-0\"\n{oops\n\"id-6\"\n");
  write_text(fs::path(folders[1]) / "ids-00000.jsonl", "\"id-1\"\n\"id-4\"\n\"id-10\"");  // torn last line
  for (const auto& f : folders) test::rehash(f);
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": shard 0 (ids-00000.jsonl): line 2: not a JSON value");
  EXPECT_PROBLEM(r, folders[1] + ": shard 0 (ids-00000.jsonl): does not end with a newline");
  EXPECT_EQ(r.problems.size(), 2u) << all_of(r);
}

TEST(Verify, ExtraUncommittedShard) {
  const auto folders = test::write_job(test::scratch_dir("verify-extra"), EmbedJob{});
  test::write_embeddings(fs::path(folders[0]) / "embeddings-00009.npy", {0}, 4, "f32");
  write_text(fs::path(folders[1]) / "ids-00007.jsonl", "1\n");
  write_text(fs::path(folders[2]) / "embeddings-00002.npy.stoke-tmp-123-0", "partial");
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[0] + ": embeddings-00009.npy: not committed");
  EXPECT_PROBLEM(r, folders[1] + ": ids-00007.jsonl: not committed");
  EXPECT_EQ(r.problems.size(), 2u) << all_of(r);  // the temporary file is a note, not a problem
  ASSERT_EQ(r.notes.size(), 1u) << all_of(r);
  EXPECT_NE(r.notes[0].find("1 temporary file"), std::string::npos) << r.notes[0];
}

TEST(Verify, IncompleteManifest) {
  const auto folders = test::write_job(test::scratch_dir("verify-incomplete"), EmbedJob{});
  edit_manifest(folders[1], [](json& m) { m["complete"] = false; });
  // A shard being written when the run stopped is not a problem of an unfinished task.
  test::write_embeddings(fs::path(folders[1]) / "embeddings-00002.npy", {22}, 4, "f32");
  const VerifyReport r = run_verify(folders);
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_PROBLEM(r, folders[1] + ": unfinished", "--resume");
}

TEST(Verify, EachSharedFieldDiffering) {
  // field (dotted), a value different from the one the helper writes
  const std::vector<std::pair<std::string, json>> cases = {
      {"pooling", "cls"},
      {"normalize", false},
      {"max_length", 64},
      {"dimensions", 3},
      {"precision", "bf16"},
      {"output_dtype", "f16"},
      {"prompt", "query: "},
      {"input.sha256", sha256_hex("other input")},
      {"input.size", 999},
      {"input.text_field", "body"},
      {"input.id_field", "id"},
      {"task.count", 4},
      {"model.config_sha256", sha256_hex("other config")},
      {"model.weights", json::array()},
      {"tokenizer.sha256", sha256_hex("other tokenizer")},
      {"tokenizer.vocab_size", 999},
      {"counts.records", 21},
  };
  for (const auto& [field, value] : cases) {
    const auto folders = test::write_job(test::scratch_dir("verify-differs"), EmbedJob{});
    edit_manifest(folders[2], [&, field = field, value = value](json& m) {
      json* j = &m;
      std::string rest = field;
      for (size_t dot; (dot = rest.find('.')) != std::string::npos; rest = rest.substr(dot + 1))
        j = &(*j)[rest.substr(0, dot)];
      const json old = (*j)[rest];
      ASSERT_NE(old, value) << field;
      (*j)[rest] = value;
    });
    const json before = *test::read_manifest(folders[0]).find(field.substr(0, field.find('.')));
    const VerifyReport r = run_verify(folders);
    // Names the field, both folders and both values.
    const json want_old = field.find('.') == std::string::npos ? before : before[field.substr(field.find('.') + 1)];
    EXPECT_PROBLEM(r, folders[2] + ": " + field + " differs from " + folders[0], folders[0] + " has " + want_old.dump(),
                   folders[2] + " has " + value.dump());
  }
}

TEST(Verify, CountsNotAddingUp) {
  const auto folders = test::write_job(test::scratch_dir("verify-counts"), EmbedJob{});
  edit_manifest(folders[1], [](json& m) { m["counts"]["texts"] = 7; });  // 7 + 1 skipped > 7 records
  edit_manifest(folders[2], [](json& m) { m["counts"]["other_tasks"] = 13; });
  const VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[1] + ": counts do not add up: texts 7 + skipped 1 = 8, but task 1 of 3 has 7");
  EXPECT_PROBLEM(r, folders[1] + ": the shards hold 6 rows, but counts.texts is 7");
  EXPECT_PROBLEM(r, folders[2] + ": counts.other_tasks is 13, expected 14");
  EXPECT_EQ(r.problems.size(), 3u) << all_of(r);
}

TEST(Verify, RecordsMissingFromTheEnd) {
  // Every file consistent with its manifest, but task 0 stopped before its last
  // record and still says complete: the counts catch it.
  const auto folders = test::write_job(test::scratch_dir("verify-short"), EmbedJob{});
  edit_manifest(folders[0], [](json& m) {
    m["shards"].erase(2);
    m["committed"] = {{"rows", 6}, {"records", 20}, {"errors_bytes", 0}};
    m["counts"]["texts"] = 6;
  });
  fs::remove(fs::path(folders[0]) / "embeddings-00002.npy");
  fs::remove(fs::path(folders[0]) / "ids-00002.jsonl");
  const VerifyReport r = run_verify(folders);
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_PROBLEM(r, folders[0] + ": counts do not add up: texts 6 + skipped 0 = 6, but task 0 of 3 has 7");
}

TEST(Verify, ErrorsFile) {
  const auto folders = test::write_job(test::scratch_dir("verify-errors"), EmbedJob{});
  const fs::path errors = fs::path(folders[1]) / "errors.jsonl";
  const std::string good = read_file(errors);
  // The skipped record is also an embedded one.
  write_text(errors, "{\"record\": 10, \"file\": \"texts.jsonl\", \"line\": 11, \"error\": \"x\"}\n");
  VerifyReport r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[1] + ": shard 0 (ids-00000.jsonl): line 3: record 10 is embedded but also listed in "
                                 "errors.jsonl");
  // Another task's record, and a line too many.
  write_text(errors, good + "{\"record\": 8, \"error\": \"x\"}\n");
  r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[1] + ": errors.jsonl has 2 lines, but counts.skipped is 1");
  EXPECT_PROBLEM(r, folders[1] + ": errors.jsonl line 2: record 8 belongs to task 2, not 1");
  // Gone.
  fs::remove(errors);
  r = run_verify(folders);
  EXPECT_PROBLEM(r, folders[1] + ": errors.jsonl is missing, but counts.skipped is 1");
}

TEST(Verify, CommittedMustAgreeWithTheShards) {
  const auto folders = test::write_job(test::scratch_dir("verify-committed"), EmbedJob{});
  edit_manifest(folders[0], [](json& m) { m["committed"]["rows"] = 6; });
  const VerifyReport r = run_verify(folders);
  ASSERT_EQ(r.problems.size(), 1u) << all_of(r);
  EXPECT_PROBLEM(r, folders[0] + ": manifest.json: committed is rows 6, records 20, errors_bytes 0; the shards say 7");
}

}  // namespace
}  // namespace stoke
