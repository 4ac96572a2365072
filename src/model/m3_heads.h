// bge-m3's sparse and ColBERT heads: two nn.Linear layers FlagEmbedding keeps
// beside the XLM-R weights, each torch.save'd as a state dict
// ({"weight", "bias"}; float16 in BAAI/bge-m3), read here through the
// restricted torch reader (io/torch_checkpoint.h: no code runs).
//
// What FlagEmbedding 1.3.5 does with them (finetune/embedder/encoder_only/m3/
// runner.py, EncoderOnlyEmbedderM3Runner.get_model):
//   colbert_linear = Linear(hidden, hidden if colbert_dim <= 0 else colbert_dim)
//   sparse_linear  = Linear(hidden, 1)
// then load_state_dict of each file, strict (exactly weight and bias, shapes
// equal), the values copied into float32 parameters. It loads them only when
// BOTH files exist and otherwise keeps freshly initialised random heads (for
// training); stoke loads each file that exists and refuses to compute an
// output whose head is missing (model/encoder.h), rather than make one up.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "backend/ops.h"
#include "model/encoder_params.h"

namespace stoke {

inline constexpr const char* kSparseHeadFile = "sparse_linear.pt";
inline constexpr const char* kColbertHeadFile = "colbert_linear.pt";

// One Linear head on the host, f32 (any float dtype on disk, widened or narrowed).
struct LinearHead {
  int64_t out = 0, in = 0;
  std::vector<float> weight;  // (out, in), nn.Linear's layout
  std::vector<float> bias;    // (out)
};

// Reads `file` and checks it as load_state_dict(strict=True) would for
// Linear(hidden, out_features): exactly the tensors "weight" [out, hidden] and
// "bias" [out], float dtypes. out_features 0: any out >= 1 (ColBERT's colbert_dim).
// Throws Error(format) in one line naming the file and what is wrong (the
// reader's own refusals, TorchCheckpointError, name the file too).
LinearHead read_linear_head(const std::filesystem::path& file, int64_t hidden, int64_t out_features);

// Which heads `folder` holds (a regular file, or a link that stays inside the
// folder, of each name); a name that leaves the folder is refused.
struct M3HeadFiles {
  bool sparse = false, colbert = false;
};
M3HeadFiles find_m3_heads(const std::filesystem::path& folder);

// Reads the heads the folder has and places them, f32, on the backend into
// encoder.m3 (one wait for the copies, at load time). A folder with neither
// leaves encoder.m3 empty.
void load_m3_heads(LoadedEncoder& encoder, const std::filesystem::path& folder, Backend& backend);

// Enqueues the heads on the last hidden state h (T, H) f32, per token:
//   sparse (T, 1) f32 = relu(h · sparse_w^T + sparse_b)   FlagEmbedding's _sparse_embedding token_weights
//   colbert (T, D) f32 = normalize(h · colbert_w^T + colbert_b)   its _colbert_embedding, then F.normalize
// Either output may be empty (not computed). Every row is computed, the
// first token's too: FlagEmbedding runs colbert_linear on tokens 1.. only,
// and model/m3_outputs.h drops row 0 of each sequence — the same numbers,
// without a gather.
void m3_heads_forward(const Ops& ops, const M3HeadParams& heads, const TensorView& h, const TensorView& sparse,
                      const TensorView& colbert);

}  // namespace stoke
