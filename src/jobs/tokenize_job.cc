#include "jobs/tokenize_job.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <vector>

#include "core/error.h"
#include "core/json_write.h"
#include "core/progress.h"
#include "core/thread_pool.h"
#include "core/trace.h"
#include "io/atomic_file.h"
#include "jobs/model_tokenizer.h"
#include "jobs/output_file.h"
#include "jobs/skipped_records.h"

namespace stoke {

namespace {

constexpr size_t kBatchRecords = 2048;  // records tokenized together on the pool

void append_record(std::string& out, const Tokenizer& tok, const Encoding& enc, bool is_pair,
                   const std::string& id_json) {
  out += "{";
  if (!id_json.empty()) out += "\"id\": " + id_json + ", ";
  out += "\"ids\": ";
  json_append_ints(out, enc.ids);
  out += ", \"tokens\": [";
  for (size_t i = 0; i < enc.ids.size(); ++i) {
    if (i) out += ", ";
    json_append_string(out, tok.id_to_token(enc.ids[i]));
  }
  out += "]";
  if (is_pair) {
    out += ", \"type_ids\": ";
    json_append_ints(out, enc.type_ids);
  }
  out += "}\n";
}

}  // namespace

TokenizeSummary run_tokenize(const TokenizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  validate_common_options(options.common);
  const bool skip_bad = skip_bad_records(options.on_error);
  std::unique_ptr<Trace> trace = options.common.trace.empty() ? nullptr : std::make_unique<Trace>();
  if (trace) trace->name_thread("main");

  ModelTokenizer mt = [&] {
    TraceSpan span(trace.get(), "load tokenizer");
    return open_model_tokenizer(options.common.model, options.common.max_length);
  }();
  const Tokenizer& tok = *mt.tokenizer;
  EncodeOptions enc_opts;
  enc_opts.max_length = static_cast<size_t>(mt.max_length);
  enc_opts.truncate = !options.no_truncation;

  RecordReader reader(record_reader_options(options.common));
  OutputFile output(options.output);
  SkippedRecords skipped(options.output, options.errors, reader.label());
  ThreadPool pool(options.common.workers > 0 ? static_cast<size_t>(options.common.workers) : 0);
  Progress progress("tokenize", reader.total_bytes(), !options.common.quiet);

  TokenizeSummary summary;
  summary.max_length = mt.max_length;
  summary.max_length_from = mt.max_length_from;
  std::vector<InputRecord> records(kBatchRecords);
  std::vector<TextInput> inputs;
  std::string out;
  for (;;) {
    size_t n = 0;
    {
      TraceSpan span(trace.get(), "read");
      while (n < kBatchRecords && reader.next(records[n])) {
        if (records[n].error.empty()) {
          ++n;
        } else if (skip_bad) {
          skipped.add(records[n]);  // no output line; records[n] is read again
        } else {
          throw Error(Errc::format, describe_bad_record(reader, records[n]) +
                                        " (--on-error skip skips bad records into an errors file and goes on)");
        }
      }
      span.set_arg(static_cast<int64_t>(n));
    }
    if (n == 0) break;
    inputs.clear();
    for (size_t i = 0; i < n; ++i) {
      inputs.push_back({records[i].text, records[i].pair ? std::optional<std::string_view>(*records[i].pair)
                                                         : std::nullopt});
      summary.replaced_utf8 += records[i].replaced_utf8;
    }
    EncodeStats stats;
    std::vector<Encoding> encs;
    {
      TraceSpan span(trace.get(), "tokenize");
      encs = tok.encode_batch(inputs, enc_opts, &pool, &stats);
      span.set_arg(static_cast<int64_t>(n));
    }
    {
      TraceSpan span(trace.get(), "write");
      out.clear();
      for (size_t i = 0; i < n; ++i) {
        append_record(out, tok, encs[i], inputs[i].pair.has_value(), records[i].id_json);
        summary.tokens += encs[i].ids.size();
        summary.pairs += inputs[i].pair.has_value();
      }
      output.write(out);
    }
    summary.records += n;
    summary.truncated += stats.truncated;
    summary.capped += stats.capped;
    summary.replaced_utf8 += stats.replaced_utf8;
    progress.update(summary.records, reader.bytes_read());
  }
  output.commit();
  skipped.commit();
  progress.finish();
  summary.skipped = skipped.count();
  summary.errors_file = skipped.where();
  summary.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (trace) write_file_atomic(options.common.trace, std::string_view(trace->to_json()));
  return summary;
}

}  // namespace stoke
