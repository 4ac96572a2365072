// Loading bge-m3's heads (model/m3_heads.h) from colbert_linear.pt and
// sparse_linear.pt: every hostile file of tests/data/bge_m3_tiny/bad_heads
// (wrong shapes, a missing or extra tensor, an integer weight) refused in one
// line naming the file; a pickle the restricted reader refuses, refused; a
// head file that is a symlink leaving the folder, refused; a folder with one
// head or none loads what it has and refuses to compute the other; and a
// ColBERT head of another width (8, not the hidden size) computes
// normalize(h W^T + b) per token, checked against a double-precision
// computation from the same forward's last hidden state.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <string>

#include "core/error.h"
#include "cpu/cpu_backend.h"
#include "io/model_folder.h"
#include "support/fixtures.h"
#include "support/m3_goldens.h"

namespace stoke {
namespace {

namespace fs = std::filesystem;

// A copy of the tiny bge-m3 folder without its heads, in a scratch folder.
fs::path headless_copy(const std::string& name) {
  const fs::path dir = test::scratch_dir("m3-heads-" + name);
  fs::remove_all(dir);
  fs::copy(test::m3::model_dir(), dir, fs::copy_options::recursive);
  fs::remove(dir / kSparseHeadFile);
  fs::remove(dir / kColbertHeadFile);
  return dir;
}

std::string load_error(const fs::path& folder) {
  cpu::CpuBackend backend(cpu::reference_kernels());
  const ModelFolder f = open_model_folder(folder);
  LoadedEncoder enc = load_encoder(f.config, open_model_folder_weights(f), backend, {});
  try {
    load_m3_heads(enc, folder, backend);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct BadHead {
  const char* file;
  const char* says;  // a part of the message
};

TEST(M3Heads, HostileHeadFilesAreRefusedNamingTheFile) {
  const BadHead cases[] = {
      {"sparse_two_outputs.pt", "has shape [2, 32], expected [1, 32]"},
      {"sparse_wrong_hidden.pt", "has shape [1, 33], expected [1, 32]"},
      {"sparse_no_bias.pt", "tensor \"bias\" is missing"},
      {"sparse_bias_shape.pt", "tensor \"bias\" has shape [2], expected [1]"},
      {"sparse_int_weight.pt", "has dtype I64"},
      {"colbert_wrong_hidden.pt", "has shape [32, 31], expected [D, 32]"},
      {"colbert_bias_mismatch.pt", "tensor \"bias\" has shape [33], expected [32]"},
      {"colbert_no_bias.pt", "tensor \"bias\" is missing"},
      {"colbert_extra_tensor.pt", "unexpected tensor \"scale\""},
      {"colbert_1d_weight.pt", "has shape [1024], expected [D, 32]"},
      {"colbert_no_weight.pt", "tensor \"weight\" is missing"},
  };
  for (const BadHead& c : cases) {
    const std::string file = c.file;
    const char* target = file.rfind("sparse", 0) == 0 ? kSparseHeadFile : kColbertHeadFile;
    const fs::path dir = headless_copy("bad");
    fs::copy_file(test::m3::data_dir() / "bad_heads" / file, dir / target);
    const std::string msg = load_error(dir);
    EXPECT_NE(msg.find((dir / target).string()), std::string::npos) << file << ": " << msg;
    EXPECT_NE(msg.find(c.says), std::string::npos) << file << ": " << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << file << ": one line: " << msg;
  }
}

TEST(M3Heads, PicklesTheReaderRefusesAreRefused) {
  for (const char* refused : {"module.pt", "training_checkpoint.pt", "legacy.pt"}) {
    const fs::path dir = headless_copy("pickle");
    fs::copy_file(test::source_dir() / "tests/data/torch/refused" / refused, dir / kColbertHeadFile);
    const std::string msg = load_error(dir);
    EXPECT_NE(msg.find((dir / kColbertHeadFile).string()), std::string::npos) << refused << ": " << msg;
  }
}

TEST(M3Heads, ASymlinkLeavingTheFolderIsRefused) {
  const fs::path dir = headless_copy("symlink");
  const fs::path outside = test::scratch_dir("m3-heads-outside");
  fs::copy_file(test::m3::model_dir() / kSparseHeadFile, outside / "elsewhere.pt", fs::copy_options::overwrite_existing);
  fs::create_symlink(outside / "elsewhere.pt", dir / kSparseHeadFile);
  const std::string msg = load_error(dir);
  EXPECT_NE(msg.find("outside the folder"), std::string::npos) << msg;
}

TEST(M3Heads, AFolderWithOneHeadComputesOnlyThatOne) {
  const fs::path dir = headless_copy("one");
  fs::copy_file(test::m3::model_dir() / kSparseHeadFile, dir / kSparseHeadFile);
  cpu::CpuBackend backend(cpu::reference_kernels());
  const ModelFolder f = open_model_folder(dir);
  LoadedEncoder enc = load_encoder(f.config, open_model_folder_weights(f), backend, {});
  load_m3_heads(enc, dir, backend);
  EXPECT_TRUE(enc.m3.has_sparse());
  EXPECT_FALSE(enc.m3.has_colbert());
  PackedBatch batch;
  batch.clear();
  const std::vector<int32_t> ids = {0, 100, 2}, types = {0, 0, 0};
  batch.add(ids, types, f.config);
  EncoderRunner runner(enc, backend, 8, 1);
  std::vector<float> sparse(3), colbert(3 * 32);
  EncoderOutputs out;
  out.sparse_weights = sparse.data();
  backend.wait(*runner.run(batch, out));
  EXPECT_GE(sparse[1], 0.0f);  // relu
  out.colbert = colbert.data();
  try {
    runner.run(batch, out);
    FAIL() << "ColBERT vectors without colbert_linear.pt";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), Errc::invalid_argument);
    EXPECT_NE(std::string(e.what()).find("colbert_linear.pt"), std::string::npos) << e.what();
  }
}

TEST(M3Heads, AFolderWithoutHeadsHasNone) {
  cpu::CpuBackend backend(cpu::reference_kernels());
  const fs::path dir = test::fixture("models/tiny-xlmr");
  const ModelFolder f = open_model_folder(dir);
  LoadedEncoder enc = load_encoder(f.config, open_model_folder_weights(f), backend, {});
  load_m3_heads(enc, dir, backend);
  EXPECT_FALSE(enc.m3.has_sparse());
  EXPECT_FALSE(enc.m3.has_colbert());
  PackedBatch batch;
  batch.clear();
  const std::vector<int32_t> ids = {0, 100, 2}, types = {0, 0, 0};
  batch.add(ids, types, f.config);
  EncoderRunner runner(enc, backend, 8, 1);
  std::vector<float> sparse(3);
  EncoderOutputs out;
  out.sparse_weights = sparse.data();
  try {
    runner.run(batch, out);
    FAIL() << "sparse weights without sparse_linear.pt";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("sparse_linear.pt"), std::string::npos) << e.what();
  }
}

TEST(M3Heads, AColbertHeadOfAnotherWidthIsNormalizeOfTheLinear) {
  const fs::path dir = headless_copy("dim8");
  const fs::path head = test::m3::data_dir() / "other_heads" / "colbert_dim8.pt";
  fs::copy_file(head, dir / kColbertHeadFile);
  const LinearHead lin = read_linear_head(head, 32, 0);
  ASSERT_EQ(lin.out, 8);
  for (const char* kernels : {"reference", "fast"}) {
    cpu::CpuBackend backend(std::string(kernels) == "fast" ? cpu::fast_kernels() : cpu::reference_kernels());
    const ModelFolder f = open_model_folder(dir);
    LoadedEncoder enc = load_encoder(f.config, open_model_folder_weights(f), backend, {});
    load_m3_heads(enc, dir, backend);
    ASSERT_EQ(enc.m3.colbert_dim(), 8);
    PackedBatch batch;
    batch.clear();
    const std::vector<int32_t> a = {0, 100, 200, 300, 2}, b = {0, 7, 2};
    batch.add(a, std::vector<int32_t>(a.size(), 0), f.config);
    batch.add(b, std::vector<int32_t>(b.size(), 0), f.config);
    const int64_t T = batch.tokens();
    EncoderRunner runner(enc, backend, T, 2);
    std::vector<float> hidden(static_cast<size_t>(T) * 32), colbert(static_cast<size_t>(T) * 8);
    EncoderOutputs out;
    out.hidden = hidden.data();
    out.colbert = colbert.data();
    backend.wait(*runner.run(batch, out));
    for (int64_t t = 0; t < T; ++t) {
      std::vector<double> v(8);
      double norm = 0;
      for (int o = 0; o < 8; ++o) {
        double acc = lin.bias[static_cast<size_t>(o)];
        for (int k = 0; k < 32; ++k) acc += double(hidden[static_cast<size_t>(t * 32 + k)]) * lin.weight[static_cast<size_t>(o * 32 + k)];
        v[static_cast<size_t>(o)] = acc;
        norm += acc * acc;
      }
      norm = std::max(std::sqrt(norm), 1e-12);
      for (int o = 0; o < 8; ++o) v[static_cast<size_t>(o)] /= norm;
      EXPECT_LE(test::m3::row_error(&colbert[static_cast<size_t>(t * 8)], v.data(), 8), 1e-6) << kernels << " token " << t;
    }
    EXPECT_EQ(colbert_rows(batch, 0).first, 1);
    EXPECT_EQ(colbert_rows(batch, 0).count, 4);
    EXPECT_EQ(colbert_rows(batch, 1).first, 6);
    EXPECT_EQ(colbert_rows(batch, 1).count, 2);
  }
}

}  // namespace
}  // namespace stoke
