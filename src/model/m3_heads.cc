#include "model/m3_heads.h"

#include <string>

#include "core/error.h"
#include "io/model_folder_error.h"
#include "io/torch_checkpoint.h"

namespace stoke {

namespace fs = std::filesystem;

LinearHead read_linear_head(const fs::path& file, int64_t hidden, int64_t out_features) {
  const std::string label = file.string();
  const auto ckpt = TorchCheckpoint::open(file);
  auto fail = [&](const std::string& what) -> void { throw Error(Errc::format, label + ": " + what); };
  // load_state_dict(strict=True): nothing missing, nothing unexpected.
  for (const StoredTensor& t : ckpt->tensors())
    if (t.name != "weight" && t.name != "bias")
      fail("unexpected tensor \"" + t.name + "\" (an nn.Linear state dict holds exactly \"weight\" and \"bias\")");
  const StoredTensor* w = ckpt->find("weight");
  const StoredTensor* b = ckpt->find("bias");
  if (!w) fail("tensor \"weight\" is missing");
  if (!b) fail("tensor \"bias\" is missing (an nn.Linear head with a bias is expected)");
  for (const StoredTensor* t : {w, b})
    if (!dtype_is_float(t->dtype))
      fail("tensor \"" + t->name + "\" has dtype " + std::string(dtype_name(t->dtype)) +
           "; weights must be F32, F16, BF16 or F64");
  const std::string expected_w = out_features > 0 ? shape_string({out_features, hidden}) : "[D, " + std::to_string(hidden) + "]";
  if (w->shape.size() != 2 || w->shape[1] != hidden || w->shape[0] < 1 ||
      (out_features > 0 && w->shape[0] != out_features))
    fail("tensor \"weight\" has shape " + shape_string(w->shape) + ", expected " + expected_w +
         " (out_features, in_features = the hidden size)");
  const int64_t out = w->shape[0];
  if (b->shape != std::vector<int64_t>{out})
    fail("tensor \"bias\" has shape " + shape_string(b->shape) + ", expected [" + std::to_string(out) +
         "] (the weight's out_features)");
  LinearHead head;
  head.out = out;
  head.in = hidden;
  head.weight.resize(static_cast<size_t>(w->numel()));
  head.bias.resize(static_cast<size_t>(b->numel()));
  copy_stored_as_f32(*w, head.weight.data());
  copy_stored_as_f32(*b, head.bias.data());
  return head;
}

M3HeadFiles find_m3_heads(const fs::path& folder) {
  M3HeadFiles found;
  for (const auto& [name, flag] : {std::pair{kSparseHeadFile, &found.sparse}, std::pair{kColbertHeadFile, &found.colbert}}) {
    std::error_code ec;
    if (!fs::exists(fs::symlink_status(folder / name, ec))) continue;
    if (const std::string why = folder_path_problem(folder, name); !why.empty())
      throw Error(Errc::refused, (folder / name).string() + " " + why);
    *flag = true;
  }
  return found;
}

void load_m3_heads(LoadedEncoder& enc, const fs::path& folder, Backend& backend) {
  const M3HeadFiles files = find_m3_heads(folder);
  if (!files.sparse && !files.colbert) return;
  const int64_t H = enc.config.hidden_size;
  std::vector<std::vector<float>> pending;  // host copies the enqueued copies read, until the wait below
  auto place = [&](std::vector<float> host, std::vector<int64_t> shape) -> TensorView {
    auto buffer = backend.allocate(host.size() * 4);
    backend.copy_to_device(buffer->data(), host.data(), host.size() * 4);
    const TensorView v = shape.size() == 2 ? TensorView(buffer->data(), DType::f32, {shape[0], shape[1]})
                                           : TensorView(buffer->data(), DType::f32, {shape[0]});
    enc.buffers.push_back(std::move(buffer));
    pending.push_back(std::move(host));
    return v;
  };
  M3HeadParams heads;
  try {
    if (files.sparse) {
      LinearHead s = read_linear_head(folder / kSparseHeadFile, H, 1);
      heads.sparse_w = place(std::move(s.weight), {1, H});
      heads.sparse_b = place(std::move(s.bias), {1});
    }
    if (files.colbert) {
      LinearHead c = read_linear_head(folder / kColbertHeadFile, H, 0);
      heads.colbert_w = place(std::move(c.weight), {c.out, H});
      heads.colbert_b = place(std::move(c.bias), {c.out});
    }
  } catch (...) {
    // A refused second head: the first one's copies are still queued and
    // read `pending`, which goes with this frame.
    try {
      backend.synchronize();
    } catch (...) {  // the refusal is the error to report
    }
    throw;
  }
  backend.synchronize();  // one wait for the copies, at load time
  enc.m3 = heads;
}

void m3_heads_forward(const Ops& ops, const M3HeadParams& heads, const TensorView& h, const TensorView& sparse,
                      const TensorView& colbert) {
  if (!sparse.empty()) ops.linear(sparse, h, heads.sparse_w, heads.sparse_b, Activation::relu, Accumulate::no);
  if (!colbert.empty()) {
    ops.linear(colbert, h, heads.colbert_w, heads.colbert_b, Activation::none, Accumulate::no);
    // F.normalize(x, dim=-1) = x / max(||x||, 1e-12): l2_normalize's rule.
    ops.l2_normalize(colbert);
  }
}

}  // namespace stoke
