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

// Reads up to records.size() good records into records[0, n); a bad record
// goes to `skipped` (--on-error skip) or stops the job naming its line.
size_t read_batch(RecordReader& reader, std::vector<InputRecord>& records, bool skip_bad, SkippedRecords& skipped,
                  Trace* trace) {
  TraceSpan span(trace, "read");
  size_t n = 0;
  while (n < records.size() && reader.next(records[n])) {
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
  return n;
}

// One batch's texts tokenized on the pool and written as JSON lines, in order.
class BatchTokenizer {
 public:
  BatchTokenizer(const Tokenizer& tok, const EncodeOptions& options, ThreadPool& pool, OutputFile& output,
                 Trace* trace)
      : tok_(tok), options_(options), pool_(pool), output_(output), trace_(trace) {}

  void run(const std::vector<InputRecord>& records, size_t n, TokenizeSummary& summary) {
    inputs_.clear();
    for (size_t i = 0; i < n; ++i) {
      inputs_.push_back({records[i].text, records[i].pair ? std::optional<std::string_view>(*records[i].pair)
                                                          : std::nullopt});
      summary.replaced_utf8 += records[i].replaced_utf8;
    }
    EncodeStats stats;
    std::vector<Encoding> encs;
    {
      TraceSpan span(trace_, "tokenize");
      encs = tok_.encode_batch(inputs_, options_, &pool_, &stats);
      span.set_arg(static_cast<int64_t>(n));
    }
    {
      TraceSpan span(trace_, "write");
      out_.clear();
      for (size_t i = 0; i < n; ++i) {
        append_record(out_, tok_, encs[i], inputs_[i].pair.has_value(), records[i].id_json);
        summary.tokens += encs[i].ids.size();
        summary.pairs += inputs_[i].pair.has_value();
      }
      output_.write(out_);
    }
    summary.records += n;
    summary.truncated += stats.truncated;
    summary.capped += stats.capped;
    summary.replaced_utf8 += stats.replaced_utf8;
  }

 private:
  const Tokenizer& tok_;
  const EncodeOptions& options_;
  ThreadPool& pool_;
  OutputFile& output_;
  Trace* trace_;
  std::vector<TextInput> inputs_;  // reused from batch to batch
  std::string out_;
};

}  // namespace

TokenizeSummary run_tokenize(const TokenizeOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  validate_common_options(options.common);
  const bool skip_bad = options.skip_bad_records;
  std::unique_ptr<Trace> trace = options.common.trace.empty() ? nullptr : std::make_unique<Trace>();
  if (trace) trace->name_thread("main");

  ModelTokenizer mt = [&] {
    TraceSpan span(trace.get(), "load tokenizer");
    return open_model_tokenizer(options.common.model, options.common.max_length);
  }();
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
  BatchTokenizer batch(*mt.tokenizer, enc_opts, pool, output, trace.get());
  while (const size_t n = read_batch(reader, records, skip_bad, skipped, trace.get())) {
    batch.run(records, n, summary);
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
