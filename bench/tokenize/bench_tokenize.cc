// Tokenizer throughput on a JSONL corpus: tokens/s and MB/s, per thread count.
// Prints one JSON line per (model, threads) so bench/tokenize/run.sh can put
// stoke next to its peers (HF tokenizers, SentencePiece's Python encoder).
//
//   bench_tokenize MODEL_DIR CORPUS.jsonl [--threads 1,2] [--seconds 3] [--offsets]
//     --offsets: time tokenize_with_offsets (the aligned path TEI's /tokenize
//     takes) instead of encode_batch; tokens are counted without special tokens.
//   bench_tokenize MODEL_DIR --hostile      seconds per 1 MB of hostile text
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "core/thread_pool.h"
#include "text/tokenizer_loader.h"

using namespace stoke;

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR CORPUS.jsonl [--threads 1,2] [--seconds S] [--offsets]\n", argv[0]);
    return 2;
  }
  std::vector<size_t> thread_counts = {1, 2};
  double min_seconds = 3.0;
  bool offsets = false;
  for (int i = 3; i < argc; ++i) {
    const std::string flag = argv[i];
    if (flag == "--offsets") {
      offsets = true;
      continue;
    }
    if (i + 1 >= argc) break;
    ++i;
    if (flag == "--threads") {
      thread_counts.clear();
      std::stringstream ss(argv[i]);
      std::string part;
      while (std::getline(ss, part, ',')) thread_counts.push_back(std::stoul(part));
    } else if (flag == "--seconds") {
      min_seconds = std::stod(argv[i]);
    }
  }
  auto tok = load_tokenizer(argv[1]);
  if (std::string(argv[2]) == "--hostile") {
    // RELIABILITY item 3: each of these should take well under a second per core.
    auto repeat = [](std::string_view unit) {
      std::string s;
      while (s.size() < (1u << 20)) s.append(unit);
      return s;
    };
    const std::pair<const char*, std::string> cases[] = {
        {"1 MB word without spaces", repeat("abcdefghij")},
        {"1 MB of emoji (ZWJ sequences)", repeat("\xF0\x9F\x91\xA8\xE2\x80\x8D\xF0\x9F\x91\xA9\xF0\x9F\x8D\x95")},
        {"1 MB of CJK", repeat("\xE6\x88\x91\xE7\x88\xB1\xE8\x87\xAA\xE7\x84\xB6")},
        {"1 MB of combining marks", "e" + repeat("\xCC\x81")},
        {"1 MB of mixed marks (Zalgo)", "a" + repeat("\xCC\x81\xCC\x80\xCD\x9C\xCC\xA3")},
        {"1 MB of invalid UTF-8", repeat("\xFF\xC3(\xED\xA0\x80 ")},
        {"1 MB of special-token prefixes", repeat("[CL<ma[SE")},
        {"1 MB of prose", repeat("The quick brown fox, naive cafe, jumps over the lazy dog. ")},
    };
    for (const auto& [name, text] : cases) {
      const auto start = std::chrono::steady_clock::now();
      const auto enc = tok->encode(text, EncodeOptions{0, false});
      const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      nlohmann::json row = {{"impl", "stoke"}, {"tokenizer", tok->model().describe()}, {"case", name},
                            {"bytes", text.size()}, {"tokens", enc.ids.size()}, {"seconds", secs}};
      std::printf("%s\n", row.dump().c_str());
    }
    return 0;
  }
  std::vector<std::string> texts;
  size_t bytes = 0;
  {
    std::ifstream in(argv[2]);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      texts.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
      bytes += texts.back().size();
    }
  }
  std::vector<TextInput> inputs;
  for (const auto& t : texts) inputs.push_back({t, std::nullopt});
  const EncodeOptions no_truncation{0, false};

  // The offsets path: one tokenize_with_offsets per text, texts shared out
  // on the pool as encode_batch does; returns the ids made (0 for a text
  // whose offsets are unknown).
  auto offsets_pass = [&](ThreadPool& pool) {
    std::vector<size_t> ids(texts.size());
    pool.parallel_for(texts.size(), [&](size_t begin, size_t end) {
      for (size_t k = begin; k < end; ++k) {
        const auto r = tok->tokenize_with_offsets(texts[k]);
        ids[k] = r ? r->ids.size() : 0;
      }
    });
    size_t total = 0;
    for (size_t n : ids) total += n;
    return total;
  };
  auto encode_pass = [&](ThreadPool& pool, EncodeStats* stats) {
    size_t total = 0;
    for (const auto& e : tok->encode_batch(inputs, no_truncation, &pool, stats)) total += e.ids.size();
    return total;
  };

  for (size_t threads : thread_counts) {
    ThreadPool pool(threads);
    // One untimed pass warms caches (and SentencePiece's unknown-run probes).
    EncodeStats warm;
    const size_t tokens_per_pass = offsets ? offsets_pass(pool) : encode_pass(pool, &warm);
    int passes = 0;
    const auto start = std::chrono::steady_clock::now();
    double secs = 0;
    do {
      if (offsets)
        offsets_pass(pool);
      else
        encode_pass(pool, nullptr);
      ++passes;
      secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    } while (secs < min_seconds);
    nlohmann::json row = {
        {"impl", offsets ? "stoke (offsets)" : "stoke"},
        {"tokenizer", tok->model().describe()},
        {"threads", threads},
        {"texts", texts.size()},
        {"tokens", tokens_per_pass},
        {"bytes", bytes},
        {"passes", passes},
        {"seconds", secs},
        {"tokens_per_s", static_cast<double>(tokens_per_pass) * passes / secs},
        {"mb_per_s", static_cast<double>(bytes) * passes / secs / 1e6},
    };
    std::printf("%s\n", row.dump().c_str());
  }
  return 0;
}
