#include "train/evaluate.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "core/error.h"

namespace stoke::train {

PackedBatch pack_examples(const std::vector<Example>& examples, const std::vector<uint32_t>& indices,
                          const HfConfig& config) {
  PackedBatch batch;
  batch.clear();
  for (uint32_t i : indices) batch.add(examples[i].ids, examples[i].type_ids, config);
  return batch;
}

EvalMetrics classification_metrics(const std::vector<float>& logits, int64_t C, const std::vector<int32_t>& labels) {
  EvalMetrics m;
  const size_t n = labels.size();
  m.examples = static_cast<int64_t>(n);
  if (n == 0) return m;
  std::vector<int64_t> tp(static_cast<size_t>(C), 0), fp(static_cast<size_t>(C), 0), fn(static_cast<size_t>(C), 0);
  double loss = 0;
  int64_t correct = 0;
  for (size_t i = 0; i < n; ++i) {
    const float* z = logits.data() + i * static_cast<size_t>(C);
    int64_t arg = 0;
    for (int64_t c = 1; c < C; ++c)
      if (z[c] > z[arg]) arg = c;  // the first maximum, as argmax
    double mx = z[arg], sum = 0;
    for (int64_t c = 0; c < C; ++c) sum += std::exp(static_cast<double>(z[c]) - mx);
    const int32_t y = labels[i];
    loss += mx + std::log(sum) - z[y];
    if (arg == y) {
      ++correct;
      ++tp[static_cast<size_t>(y)];
    } else {
      ++fp[static_cast<size_t>(arg)];
      ++fn[static_cast<size_t>(y)];
    }
  }
  m.loss = loss / static_cast<double>(n);
  m.accuracy = static_cast<double>(correct) / static_cast<double>(n);
  double f1 = 0;
  int64_t classes = 0;
  for (int64_t c = 0; c < C; ++c) {
    const auto k = static_cast<size_t>(c);
    if (tp[k] + fp[k] + fn[k] == 0) continue;  // in neither labels nor predictions
    ++classes;
    f1 += 2.0 * static_cast<double>(tp[k]) / static_cast<double>(2 * tp[k] + fp[k] + fn[k]);
  }
  m.macro_f1 = classes > 0 ? f1 / static_cast<double>(classes) : 0.0;
  return m;
}

EvalMetrics evaluate(EncoderRunner& runner, Backend& backend, const HfConfig& config,
                     const std::vector<Example>& examples, int64_t batch_size, bool regression) {
  const int64_t C = std::max<int64_t>(config.num_labels(), 1);
  std::vector<float> logits(examples.size() * static_cast<size_t>(C));
  // Longest first, so similar lengths share a batch; results land by index.
  std::vector<uint32_t> order(examples.size());
  std::iota(order.begin(), order.end(), 0u);
  std::stable_sort(order.begin(), order.end(),
                   [&](uint32_t a, uint32_t b) { return examples[a].ids.size() > examples[b].ids.size(); });
  std::vector<std::vector<float>> outs;
  std::vector<std::vector<uint32_t>> batches;
  for (size_t b = 0; b < order.size(); b += static_cast<size_t>(batch_size))
    batches.emplace_back(order.begin() + static_cast<long>(b),
                         order.begin() + static_cast<long>(std::min(order.size(), b + static_cast<size_t>(batch_size))));
  outs.resize(batches.size());
  std::shared_ptr<Event> last;
  for (size_t b = 0; b < batches.size(); ++b) {
    outs[b].resize(batches[b].size() * static_cast<size_t>(C));
    EncoderOutputs out;
    out.logits = outs[b].data();
    last = runner.run(pack_examples(examples, batches[b], config), out);
  }
  if (last) backend.wait(*last);  // the one host sync of an evaluation
  for (size_t b = 0; b < batches.size(); ++b)
    for (size_t i = 0; i < batches[b].size(); ++i)
      std::copy_n(outs[b].data() + i * static_cast<size_t>(C), C, logits.data() + batches[b][i] * static_cast<size_t>(C));
  if (regression) {
    EvalMetrics m;
    m.regression = true;
    m.examples = static_cast<int64_t>(examples.size());
    double se = 0;
    for (size_t i = 0; i < examples.size(); ++i) {
      const double d = static_cast<double>(logits[i]) - examples[i].target;
      se += d * d;
    }
    m.loss = examples.empty() ? 0 : se / static_cast<double>(examples.size());
    return m;
  }
  std::vector<int32_t> labels;
  for (const Example& e : examples) labels.push_back(e.label);
  return classification_metrics(logits, C, labels);
}

}  // namespace stoke::train
