// `stoke inspect` from the command line, one test per kind of path: a model
// folder says whether it embeds or classifies and why; a .npy file is read as
// one by its magic bytes; an embed output folder is described from its
// manifest (complete, or unfinished with the resume command); a train output
// folder too; anything else is one line naming what it is and what inspect
// reads, with exit status 1. Every report is checked for the text it must hold.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "core/file_util.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "support/background_stoke.h"
#include "support/embed_output.h"
#include "support/fixtures.h"
#include "support/random_bert.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using test::RunResult;
using test::run_stoke;

const char* kWhatInspectReads =
    "inspect reads a model folder, a .safetensors file, a .npy file, or an embed or train output folder";

std::string model(const std::string& name) { return test::fixture("models/" + name).string(); }
std::string texts() { return test::fixture("golden/texts.jsonl").string(); }

int count_lines(const std::string& s) { return static_cast<int>(std::count(s.begin(), s.end(), '\n')); }

int64_t golden_records() {
  std::ifstream in(texts());
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += !line.empty();
  return n;
}

void expect_has(const std::string& text, const std::string& want) {
  EXPECT_NE(text.find(want), std::string::npos) << "missing: " << want << "\n---\n" << text;
}

// A user error: exit status 1, one line on stderr naming the path, nothing on stdout.
void expect_one_line_refusal(const RunResult& r, const std::string& path, const std::string& want) {
  EXPECT_EQ(r.status, 1) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(r.out, "");
  expect_has(r.err, "stoke: error: " + path + ": " + want);
}

// tiny-bert's encoder with random weights and no head; sentence-transformers
// modules copied when asked.
fs::path encoder_folder(const std::string& name, const json& overrides, bool sentence_transformers) {
  const fs::path dir = test::scratch_dir(name) / "model";
  test::make_random_encoder(dir, test::fixture("models/tiny-bert"), overrides);
  if (sentence_transformers) {
    fs::create_directories(dir / "1_Pooling");
    fs::copy_file(test::fixture("models/tiny-bert/modules.json"), dir / "modules.json");
    fs::copy_file(test::fixture("models/tiny-bert/sentence_bert_config.json"), dir / "sentence_bert_config.json");
    fs::copy_file(test::fixture("models/tiny-bert/1_Pooling/config.json"), dir / "1_Pooling/config.json");
  }
  return dir;
}

// ---- model folders: embedding model or classifier, and why

TEST(CliInspect, AClassifierWithSentenceTransformersModulesSaysBoth) {
  RunResult r = run_stoke("inspect " + model("tiny-bert"));
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "kind: classifier and embedding model — classification head weights present (classifier.weight "
                    "[3, 64]; architectures BertForSequenceClassification) and sentence-transformers modules "
                    "(Transformer -> Pooling -> Normalize): `stoke classify` uses the head, `stoke embed` and "
                    "`stoke serve` the modules\n");
  expect_has(r.out, "labels: 3 (LABEL_0, LABEL_1, LABEL_2)\n");
  r = run_stoke("inspect " + model("tiny-xlmr"));
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "classification head weights present (classifier.out_proj.weight [3, 64]; architectures "
                    "XLMRobertaForSequenceClassification)");
}

TEST(CliInspect, EmbeddingModelsSayWhyAndShowNoLabels) {
  // config.json keeps transformers' default of 2 labels: not evidence of a classifier.
  const json bare = {{"architectures", {"BertModel"}},
                     {"id2label", {{"0", "LABEL_0"}, {"1", "LABEL_1"}}},
                     {"label2id", {{"LABEL_0", 0}, {"LABEL_1", 1}}}};
  const fs::path st = encoder_folder("cli-inspect-st", bare, true);
  RunResult r = run_stoke("inspect " + st.string());
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "kind: embedding model — sentence-transformers modules (Transformer -> Pooling -> Normalize) and "
                    "no classification head\n");
  EXPECT_EQ(r.out.find("labels:"), std::string::npos) << r.out;
  expect_has(r.out, "classifier absent");

  const fs::path plain = encoder_folder("cli-inspect-plain", bare, false);
  r = run_stoke("inspect " + plain.string());
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "kind: embedding model — a plain encoder (architectures BertModel), no classification head and no "
                    "sentence-transformers modules: `stoke embed` pools the mean\n");
  EXPECT_EQ(r.out.find("labels:"), std::string::npos) << r.out;

  // A *ForSequenceClassification config over weights without the head: the weights decide.
  const fs::path headless = encoder_folder("cli-inspect-headless", json::object(), false);
  r = run_stoke("inspect " + headless.string());
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "kind: embedding model (an encoder without its classification head) — architectures names "
                    "BertForSequenceClassification but the weights hold no classifier tensors: `stoke classify` "
                    "refuses it, `stoke train` starts a new head\n");
  EXPECT_EQ(r.out.find("labels:"), std::string::npos) << r.out;
}

TEST(CliInspect, AOneLabelClassifierIsAReranker) {
  const json one_label = {{"id2label", {{"0", "LABEL_0"}}}, {"label2id", {{"LABEL_0", 0}}}};
  const fs::path dir = encoder_folder("cli-inspect-reranker", one_label, false);
  // Add the head (classifier.weight [1, 64], .bias [1]) to the encoder's weights.
  std::vector<TensorToWrite> tensors;
  auto file = SafetensorsFile::open(dir / "model.safetensors");
  for (const StoredTensor& t : file->tensors()) tensors.push_back({t.name, t.dtype, t.shape, t.data});
  std::vector<float> w(64, 0.01f), b(1, 0.0f);
  tensors.push_back({"classifier.weight", DType::f32, {1, 64}, {reinterpret_cast<const std::byte*>(w.data()), 256}});
  tensors.push_back({"classifier.bias", DType::f32, {1}, {reinterpret_cast<const std::byte*>(b.data()), 4}});
  const std::vector<std::byte> bytes = serialize_safetensors(tensors);
  file.reset();
  std::ofstream(dir / "model.safetensors", std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  const RunResult r = run_stoke("inspect " + dir.string());
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "kind: reranker (a one-label cross-encoder) — classification head weights present "
                    "(classifier.weight [1, 64]; architectures BertForSequenceClassification)\n");
  expect_has(r.out, "labels: 1 (LABEL_0)\n");
}

// ---- .npy files, known by their magic bytes

TEST(CliInspect, NpyFilesAreReadByTheirMagicBytes) {
  const fs::path dir = test::scratch_dir("cli-inspect-npy");
  std::vector<float> values(15, 1.5f);
  write_npy(dir / "a.npy", DType::f32, 3, 5, std::as_bytes(std::span(values)));
  const size_t header = npy_header(DType::f32, 3, 5).size();
  const std::string bytes = read_file(dir / "a.npy");
  std::ofstream(dir / "no-extension.bin", std::ios::binary) << bytes;  // magic bytes, not the name
  for (const char* name : {"a.npy", "no-extension.bin"}) {
    const std::string path = (dir / name).string();
    const RunResult r = run_stoke("inspect " + path);
    ASSERT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, "npy file: " + path + " (" + std::to_string(header + 60) + " bytes)\n" +
                         "array: float32 ('<f4'), shape [3, 5], C order, 15 elements; header " +
                         std::to_string(header) + " bytes (format 1.0)\n" +
                         "size: matches the header (60 data bytes after the " + std::to_string(header) +
                         "-byte header)\n");
  }
  // Four bytes short: described, then one error line and exit status 1.
  std::ofstream(dir / "short.npy", std::ios::binary) << bytes.substr(0, bytes.size() - 4);
  RunResult r = run_stoke("inspect " + (dir / "short.npy").string());
  EXPECT_EQ(r.status, 1);
  expect_has(r.out, "array: float32 ('<f4'), shape [3, 5]");
  EXPECT_EQ(r.err, "stoke: error: " + (dir / "short.npy").string() +
                       ": truncated: the header promises 60 data bytes (15 float32 of 4 bytes) but only 56 follow "
                       "the header — an interrupted write or copy\n");
  std::ofstream(dir / "long.npy", std::ios::binary) << bytes + "abcd";
  r = run_stoke("inspect " + (dir / "long.npy").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.err, "stoke: error: " + (dir / "long.npy").string() +
                       ": 4 bytes more than the 60 data bytes the header promises (numpy.load ignores them; no "
                       "writer of .npy files leaves them)\n");
  // A broken header is one line too.
  std::ofstream(dir / "bad-header.npy", std::ios::binary) << std::string("\x93NUMPY\x01\x00\x04\x00{}x\n", 14);
  r = run_stoke("inspect " + (dir / "bad-header.npy").string());
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  expect_has(r.err, "bad-header.npy");
}

// ---- embed output folders

TEST(CliInspect, ACompleteEmbedOutputFolderIsDescribedFromItsManifest) {
  const fs::path out = test::scratch_dir("cli-inspect-embed") / "out";
  const RunResult e = run_stoke("embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --output " +
                                out.string() + " --shard-size 10");
  ASSERT_EQ(e.status, 0) << e.err;
  const int64_t rows = golden_records(), shards = (rows + 9) / 10;
  const std::string d = out.string();
  RunResult r = run_stoke("inspect " + d);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& want :
       {"embed output folder: " + d + " (complete)\n",
        "rows: " + std::to_string(rows) + " in " + std::to_string(shards) + " shards (shard size 10), from " +
            std::to_string(rows) + " input records: 0 skipped as bad, 0 left to other tasks, ",
        std::string("vectors: 64 dims, float32 (embeddings-NNNNN.npy; ids-NNNNN.jsonl beside them), pooling mean, "
                    "normalized\n"),
        "model: tiny-bert (BertForSequenceClassification, model_type bert) from " + model("tiny-bert") +
            "; precision f32 on cpu; max length 128\n",
        std::string("input: texts.jsonl (jsonl, "), std::string("text field \"text\", ids: record numbers\n"),
        std::string("settings: batch tokens 16384, max batch size 256, sort window 65536, "),
        "files: the " + std::to_string(shards) + " shards the manifest names are present, headers agreeing with its "
                                                 "rows and dims\n",
        "check: stoke verify " + d + " (every file's checksum, the counts)\n"})
    expect_has(r.out, want);
  EXPECT_EQ(r.out.find("resume:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no config.json"), std::string::npos) << r.out;

  // A shard of it, inspected alone, says where it belongs.
  r = run_stoke("inspect " + (out / "embeddings-00001.npy").string());
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "array: float32 ('<f4'), shape [10, 64], C order, 640 elements");
  expect_has(r.out, "in: embed output folder " + d + " (shard 1: the manifest says 10 rows of 64 dims, as the header "
                    "says); stoke inspect " + d + " describes it\n");
  EXPECT_EQ(r.out.find("header length is"), std::string::npos) << r.out;  // not read as safetensors

  // A shard gone: the description, then one line and exit status 1.
  fs::remove(out / "embeddings-00001.npy");
  r = run_stoke("inspect " + d);
  EXPECT_EQ(r.status, 1);
  expect_has(r.out, "files: 1 problem: embeddings-00001.npy is missing\n");
  EXPECT_EQ(r.err, "stoke: error: " + d + ": embeddings-00001.npy is missing; stoke verify " + d +
                       " lists every problem\n");
}

TEST(CliInspect, AnUnfinishedEmbedRunGivesItsResumeCommand) {
  const fs::path out = test::scratch_dir("cli-inspect-embed-killed") / "out";
  // Killed (SIGKILL) right after the second shard's manifest: two shards committed.
  const RunResult e = run_stoke("embed --quiet --model " + model("tiny-bert") + " --input " + texts() + " --output " +
                                    out.string() + " --shard-size 10",
                                "/dev/null", "STOKE_CRASH_AT=after-manifest:2");
  ASSERT_EQ(e.status, 128 + 9) << e.err;
  const std::string d = out.string();
  RunResult r = run_stoke("inspect " + d);
  ASSERT_EQ(r.status, 0) << r.err;
  for (const std::string& want :
       {"embed output folder: " + d + " (unfinished)\n",
        std::string("rows: 20 committed in 2 shards (shard size 10); the first 20 input records are accounted for\n"),
        std::string("unfinished: the run stopped or was killed before its last shard; resume takes its settings "
                    "from the manifest:\n"),
        "resume: stoke embed --output " + d + " --resume\n", "check: stoke verify " + d})
    expect_has(r.out, want);
  // And the command does resume it.
  const RunResult resumed = run_stoke("embed --quiet --output " + d + " --resume");
  ASSERT_EQ(resumed.status, 0) << resumed.err;
  r = run_stoke("inspect " + d);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "embed output folder: " + d + " (complete)\n");

  // A manifest without the run's options (written before they were kept)
  // needs the model and the input given again.
  json m = json::parse(read_file(out / "manifest.json"));
  m.erase("options");
  m["complete"] = false;
  std::ofstream(out / "manifest.json", std::ios::trunc) << m.dump(2);
  r = run_stoke("inspect " + d);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "unfinished: the run stopped or was killed before its last shard; resume it with the first run's "
                    "input and flags (resume refuses, by name, a setting that differs):\n");
  expect_has(r.out, "resume: stoke embed --output " + d + " --resume --model " +
                        m["model"]["source"]["given"].get<std::string>() + " --input texts.jsonl\n");
}

TEST(CliInspect, ARunStillGoingIsNotGivenAResumeCommand) {
  const fs::path dir = test::scratch_dir("cli-inspect-embed-running");
  const fs::path out = dir / "out";
  // Stopped (SIGSTOP) after its first shard's manifest: alive, holding the folder's lock.
  const pid_t pid = test::spawn_stoke("embed --quiet --model " + model("tiny-bert") + " --input " + texts() +
                                          " --output " + out.string() + " --shard-size 10",
                                      dir / "stderr.txt", {"STOKE_STOP_AT=after-manifest:1"});
  ASSERT_TRUE(test::wait_stopped(pid)) << read_file(dir / "stderr.txt");
  const RunResult r = run_stoke("inspect " + out.string());
  ::kill(pid, SIGKILL);
  test::wait_exit(pid);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "embed output folder: " + out.string() + " (unfinished)\n");
  expect_has(r.out, "running: stoke embed, pid " + std::to_string(pid) +
                        " holds the folder now; inspect it again when the run ends\n");
  EXPECT_EQ(r.out.find("resume:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("uncommitted:"), std::string::npos) << r.out;  // its temporary files are work in progress
}

TEST(CliInspect, ASplitJobsTaskFolderSaysWhichTask) {
  test::EmbedJob job;
  job.output_dtype = "f16";
  const auto folders = test::write_job(test::scratch_dir("cli-inspect-tasks"), job);
  const RunResult r = run_stoke("inspect " + folders[1]);
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "vectors: 4 dims, float16 ");
  expect_has(r.out, "task: 1 of 3 (record r is task r mod 3's); `stoke verify` with every task's folder proves the "
                    "set complete\n");
  expect_has(r.out, "check: stoke verify " + folders[1] + " (every file's checksum, the counts, every task)\n");
}

TEST(CliInspect, AManifestOfAnotherFormatIsOneLine) {
  const fs::path dir = test::scratch_dir("cli-inspect-other-manifest");
  std::ofstream(dir / "manifest.json") << R"({"format": "something-else"})";
  expect_one_line_refusal(run_stoke("inspect " + dir.string()), (dir / "manifest.json").string(),
                          "not a stoke embed manifest (\"format\" is something-else, expected \"stoke-embeddings\")");
  std::ofstream(dir / "manifest.json", std::ios::trunc) << "{not json";
  expect_one_line_refusal(run_stoke("inspect " + dir.string()), (dir / "manifest.json").string(), "not valid JSON");
}

// ---- train output folders

TEST(CliInspect, TrainOutputFoldersFinishedAndNot) {
  const fs::path dir = test::scratch_dir("cli-inspect-train");
  {
    std::ofstream data(dir / "train.jsonl");
    for (int i = 0; i < 40; ++i) data << json{{"text", "sample text " + std::to_string(i)}, {"label", i % 3}}.dump() << "\n";
  }
  const std::string train = "train --quiet --model " + model("tiny-bert") + " --train " + (dir / "train.jsonl").string() +
                            " --max-steps 6 --save-every 2 --batch-size 8 --output ";
  // Killed right after its first checkpoint: no final model, no run.json.
  const fs::path killed = dir / "killed";
  RunResult t = run_stoke(train + killed.string(), "/dev/null", "STOKE_CRASH_AT=checkpoint_saved:1");
  ASSERT_EQ(t.status, 128 + 9) << t.err;
  RunResult r = run_stoke("inspect " + killed.string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, "train output folder: " + killed.string() + " (unfinished: no final model yet, no run.json)\n" +
                       "checkpoints: checkpoint-2; the newest at step 2 of 6 is a model folder: stoke inspect " +
                       (killed / "checkpoint-2").string() + "\n" + "resume: stoke train --output " + killed.string() +
                       " --resume  (with the first run's --model, --train and settings: resume refuses any that "
                       "differs)\n");
  // Finished: the final model's report, then the training record.
  const fs::path done = dir / "done";
  t = run_stoke(train + done.string());
  ASSERT_EQ(t.status, 0) << t.err;
  r = run_stoke("inspect " + done.string());
  ASSERT_EQ(r.status, 0) << r.err;
  expect_has(r.out, "model folder: " + done.string() + "\n");
  expect_has(r.out, "train output: run.json: 6 of 6 steps (");
  expect_has(r.out, "; checkpoints: checkpoint-2, checkpoint-4; the folder's own model is the final one\n");
}

// ---- everything else: one line naming what it is

TEST(CliInspect, OtherFilesAreNamedInOneLine) {
  const fs::path dir = test::scratch_dir("cli-inspect-kinds");
  // A zip's local file header: the member's name length at byte 26, the name at 30.
  auto zip = [](const std::string& member) {
    std::string h("PK\x03\x04", 4);
    h += std::string(22, '\0');
    h.push_back(static_cast<char>(member.size()));
    h += std::string(3, '\0');
    return h + member + "payload";
  };
  const std::string pickle("\x80\x02}q\x00.", 6);
  struct Case {
    std::string name, bytes, says;
  };
  const std::vector<Case> cases = {
      {"model.pt", zip("archive/data.pkl"),
       "a PyTorch checkpoint (torch.save's zip of pickles, .pt/.bin): stoke reads one as a model folder's "
       "pytorch_model.bin, with a restricted reader that runs no code; inspect the model folder"},
      {"pytorch_model.bin", pickle,
       "a Python pickle (PyTorch's legacy .bin/.pt format, before PyTorch 1.6): stoke does not read it; re-save it "
       "with a current torch.save, or convert it to safetensors"},
      {"renamed.safetensors", pickle, "a Python pickle"},  // the bytes decide, not the name
      {"arrays.npz", zip("arr_0.npy"), "a NumPy .npz archive (a zip of .npy arrays)"},
      {"bundle.zip", zip("readme.txt"), "a zip archive"},
      {"model.gguf", std::string("GGUF\x03\x00\x00\x00", 8) + std::string(16, '\0'),
       "a GGUF file (llama.cpp's weights format)"},
      {"tf_model.h5", std::string("\x89HDF\r\n\x1a\n", 8) + std::string(16, '\0'),
       "an HDF5 file (Keras/TensorFlow weights, such as tf_model.h5)"},
      {"model.onnx", std::string("\x08\x07\x12\x07pytorch", 11), "an ONNX model"},
      {"settings.json", R"({"a": 1})", "a JSON file"},
      {"records.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n",
       "a JSON Lines file (records, as embed/classify/train read with --input)"},
      {"notes.txt", "hello there\n", "a text file"},
      {"empty.safetensors", "", "an empty file"},
      {"program", std::string("\x7f" "ELF\x02\x01\x01\x00\xff\xfe", 10),
       "binary data of no format inspect knows (first bytes 7f 45 4c 46 02 01 01 00)"},
  };
  for (const Case& c : cases) {
    const fs::path p = dir / c.name;
    std::ofstream(p, std::ios::binary) << c.bytes;
    const RunResult r = run_stoke("inspect " + p.string());
    expect_one_line_refusal(r, p.string(), c.says);
    expect_has(r.err, kWhatInspectReads);
  }
  // A model folder's file given alone points at the folder.
  const fs::path config = test::fixture("models/tiny-bert/config.json");
  expect_one_line_refusal(run_stoke("inspect " + config.string()), config.string(),
                          "a JSON file (config.json belongs to a model folder: stoke inspect " + model("tiny-bert") +
                              "); " + kWhatInspectReads);
  // A FIFO is named, never read (reading it would block).
  ASSERT_EQ(::mkfifo((dir / "pipe").c_str(), 0600), 0);
  expect_one_line_refusal(run_stoke("inspect " + (dir / "pipe").string()), (dir / "pipe").string(),
                          std::string("a FIFO; ") + kWhatInspectReads);
  // A folder of none of the kinds.
  fs::create_directories(dir / "folder");
  std::ofstream(dir / "folder/notes.txt") << "x";
  expect_one_line_refusal(run_stoke("inspect " + (dir / "folder").string()), (dir / "folder").string(),
                          "a folder with no config.json (a model folder), manifest.json (an embed output folder) or "
                          "checkpoint-*/ (a train output folder); it holds notes.txt; " +
                              std::string(kWhatInspectReads));
}

}  // namespace
}  // namespace stoke
