#include "jobs/batched_encoder.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <deque>
#include <numeric>

#include "core/error.h"

namespace stoke {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}
}  // namespace

BatchedEncoder::BatchedEncoder(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                               BatchedEncoderOptions options, ThreadPool& pool)
    : enc_(encoder),
      backend_(backend),
      tok_(tokenizer),
      opt_(options),
      pool_(pool),
      // A batch holds at least one whole sequence, however long.
      runner_(encoder, backend,
              std::max<int64_t>(options.batch_tokens, static_cast<int64_t>(options.encode.max_length)),
              options.max_batch_size) {
  const int64_t H = encoder.config.hidden_size;
  if (opt_.product == EncoderProduct::pooled) {
    width_ = opt_.dims > 0 ? opt_.dims : H;
    if (width_ > H)
      throw Error(Errc::invalid_argument, "--dimensions " + std::to_string(width_) + " is more than the model's " +
                                              std::to_string(H) + " hidden size");
  } else {
    width_ = encoder.config.num_labels();
  }
}

void BatchedEncoder::finish(InFlight& f, float* rows) {
  const auto t0 = std::chrono::steady_clock::now();
  backend_.wait(*f.done);  // a result read: the one host sync per batch
  stats_.compute_wait_seconds += seconds_since(t0);
  for (size_t r = 0; r < f.indices.size(); ++r)
    std::memcpy(rows + f.indices[r] * static_cast<size_t>(width_), f.out.data() + r * static_cast<size_t>(width_),
                static_cast<size_t>(width_) * sizeof(float));
}

void BatchedEncoder::run(std::span<const TextInput> inputs, float* rows) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<Encoding> encs = tok_.encode_batch(inputs, opt_.encode, &pool_, &stats_.encode);
  stats_.tokenize_seconds += seconds_since(t0);

  // Longest first: the batch that needs the most memory comes first, and each
  // batch holds texts of similar length, so the token budget is used evenly.
  std::vector<size_t> order(encs.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return encs[a].ids.size() > encs[b].ids.size(); });

  std::deque<InFlight> in_flight;
  PackedBatch batch;
  std::vector<size_t> indices;
  auto submit = [&] {
    if (indices.empty()) return;
    InFlight f;
    f.indices = indices;
    f.out.resize(indices.size() * static_cast<size_t>(width_));
    EncoderOutputs out;
    if (opt_.product == EncoderProduct::pooled) {
      out.pooled = f.out.data();
      out.pooling = opt_.pooling;
      out.normalize = opt_.normalize;
      out.dims = width_;
    } else {
      out.logits = f.out.data();
    }
    f.done = runner_.run(batch, out);
    stats_.batches++;
    in_flight.push_back(std::move(f));
    // Two batches in flight: the host prepares the next while the device works.
    if (in_flight.size() > 2) {
      finish(in_flight.front(), rows);
      in_flight.pop_front();
    }
    batch.clear();
    indices.clear();
  };
  batch.clear();
  for (size_t i : order) {
    const int64_t len = static_cast<int64_t>(encs[i].ids.size());
    if (!indices.empty() && (batch.tokens() + len > opt_.batch_tokens ||
                             static_cast<int64_t>(indices.size()) >= opt_.max_batch_size))
      submit();
    batch.add(encs[i].ids, encs[i].type_ids, enc_.config);
    indices.push_back(i);
    stats_.tokens += static_cast<uint64_t>(len);
  }
  submit();
  while (!in_flight.empty()) {
    finish(in_flight.front(), rows);
    in_flight.pop_front();
  }
  stats_.texts += inputs.size();
}

}  // namespace stoke
