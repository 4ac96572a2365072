#include "jobs/tune_embeddings.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "core/half.h"
#include "io/npy.h"

namespace stoke {

namespace fs = std::filesystem;

std::vector<float> read_output_embeddings(const fs::path& dir, int64_t* dims) {
  std::vector<float> out;
  for (int shard = 0;; ++shard) {
    char name[64];
    std::snprintf(name, sizeof name, "embeddings-%05d.npy", shard);
    const fs::path p = dir / name;
    if (!fs::exists(p)) break;
    const std::string bytes = read_file(p);
    const NpyHeader h = parse_npy_header(bytes);
    if (h.shape.size() != 2) throw Error(Errc::format, p.string() + ": expected a 2-D array");
    // The element type decides the reading: an f16 shard read as f32 pairs
    // its halves into nonsense and runs past the end of the data.
    const bool half = h.descr == "<f2";
    if (!half && h.descr != "<f4")
      throw Error(Errc::format, p.string() + ": descr '" + h.descr + "': expected '<f4' or '<f2' (stoke's shards)");
    *dims = h.shape[1];
    const size_t n = static_cast<size_t>(h.shape[0] * h.shape[1]);
    const size_t item = half ? 2 : 4;
    if (bytes.size() - h.data_offset < n * item)
      throw Error(Errc::format, p.string() + ": holds fewer bytes than its shape " + std::to_string(h.shape[0]) +
                                    " x " + std::to_string(h.shape[1]) + " needs");
    const size_t at = out.size();
    out.resize(at + n);
    const char* data = bytes.data() + h.data_offset;
    if (!half) {
      std::memcpy(out.data() + at, data, n * 4);
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      f16 x;
      std::memcpy(&x.bits, data + 2 * i, 2);
      out[at + i] = to_float(x);
    }
  }
  return out;
}

CosineAgreement cosine_agreement(const std::vector<float>& a, const std::vector<float>& c, int64_t dims) {
  CosineAgreement r;
  if (dims <= 0) return r;
  const size_t d = static_cast<size_t>(dims);
  r.rows = std::min(a.size(), c.size()) / d;
  double sum = 0;
  for (size_t row = 0; row < r.rows; ++row) {
    double dot = 0, na = 0, nc = 0;
    for (size_t k = 0; k < d; ++k) {
      const double x = a[row * d + k], y = c[row * d + k];
      dot += x * y;
      na += x * x;
      nc += y * y;
    }
    double cos = dot / std::max(std::sqrt(na * nc), 1e-30);
    if (std::isnan(cos)) cos = -1;  // a NaN vector agrees with nothing (std::min would skip it)
    r.worst = std::min(r.worst, cos);
    sum += 1 - cos;
  }
  r.mean_gap = r.rows ? sum / static_cast<double>(r.rows) : 0;
  if (r.rows == 0) return r;
  std::vector<double> mean(d, 0.0);
  for (size_t row = 0; row < r.rows; ++row)
    for (size_t k = 0; k < d; ++k) mean[k] += a[row * d + k];
  for (double& m : mean) m /= static_cast<double>(r.rows);
  double centered = 0;
  for (size_t row = 0; row < r.rows; ++row) {
    double dot = 0, na = 0, nc = 0;
    for (size_t k = 0; k < d; ++k) {
      const double x = a[row * d + k] - mean[k], y = c[row * d + k] - mean[k];
      dot += x * y;
      na += x * x;
      nc += y * y;
    }
    double cos = na == 0 && nc == 0 ? 1.0 : dot / std::max(std::sqrt(na * nc), 1e-30);  // one text: both at the mean
    if (std::isnan(cos)) cos = -1;
    r.centered_worst = std::min(r.centered_worst, cos);
    centered += cos;
  }
  r.centered_mean = centered / static_cast<double>(r.rows);
  return r;
}

std::string quality_vs_f32(const CosineAgreement& q) {
  if (q.rows == 0)
    return "vs f32: no rows to compare (no window of texts finished within a trial: a smaller --sort-window or "
           "a longer --seconds-per-trial gives some)";
  char b[200];
  std::snprintf(b, sizeof b, "vs f32 over %zu %s: centered cosine mean %.4f, min %.4f (raw cosine min %.5f)", q.rows,
                q.rows == 1 ? "text" : "texts", q.centered_mean, q.centered_worst, q.worst);
  return b;
}

}  // namespace stoke
