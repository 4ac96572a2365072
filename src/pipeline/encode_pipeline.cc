#include "pipeline/encode_pipeline.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <iterator>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <numeric>
#include <thread>

#include "core/crash_point.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/bucketer.h"
#include "pipeline/text_chunks.h"
#include "model/text_outputs.h"

namespace stoke {

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// Output slots: batches enqueued and not yet read back. Three keeps the device
// fed while the writer reads one result and the executor enqueues the next.
constexpr size_t kSlots = 3;

// One sort window: this task's records with numbers in [first, end).
//
// The device runs sequences; each yields output rows ("units"). Unchunked,
// sequence i is unit i is record i. Chunked, sequence i is unit i, a chunk
// of record unit_record[i]. Late chunking, sequence s (a document, or one
// macro-window of it) yields units [seq_units[s], seq_units[s + 1]), unit u
// pooling the sequence's token rows unit_rows[u].
struct Window {
  uint64_t first = 0, end = 0;
  std::vector<InputRecord> records;  // good records, in input order
  std::vector<InputRecord> bad;      // bad records kept for the errors file (--on-error skip)
  std::vector<Encoding> encodings;   // one per sequence
  std::vector<float> rows;           // units() x width, filled by the writer
  std::vector<uint32_t> unit_record;  // chunked: each unit's record (index into records)
  std::vector<ChunkRow> chunks;       // chunked: each unit's chunk
  std::vector<uint32_t> seq_units;    // late chunking: sequences' first units (+ the end)
  std::vector<std::pair<int32_t, int32_t>> unit_rows;  // late chunking: [begin, end) rows in the sequence
  std::vector<TextExtras> extras;              // each record's sparse / multi-vector outputs

  size_t units() const { return unit_record.empty() ? records.size() : unit_record.size(); }
  size_t record_of(size_t unit) const { return unit_record.empty() ? unit : unit_record[unit]; }
  std::pair<size_t, size_t> units_of(size_t seq) const {
    if (seq_units.empty()) return {seq, seq + 1};
    return {seq_units[seq], seq_units[seq + 1]};
  }
};
using WindowPtr = std::shared_ptr<Window>;

struct BatchJob {
  WindowPtr window;
  std::vector<uint32_t> members;  // window rows in the order of the batch
  uint32_t ordinal = 0;           // the batch's place among its window's batches
  size_t slot = 0;
  std::shared_ptr<Event> done;
  // Rows an earlier run kept for this batch (batch_journal.h): no slot, no device.
  std::shared_ptr<std::vector<float>> kept_rows;
  bool window_end = false;        // marker: every batch of `window` came before it
};

// What one batch of a window needs on a resumed (or any) run.
enum class BatchNeed {
  nothing,  // every record was committed by an earlier run: its rows are not written again
  kept,     // an earlier run finished it: its rows come from the journal
  compute,  // the device computes it
};

// Thrown inside a stage when another stage failed and the queues were aborted.
struct Aborted {};

class Pipeline {
 public:
  Pipeline(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
           const EncodePipelineOptions& options, RowSink& sink,
           const std::function<void(const PipelineProgress&)>& progress)
      : enc_(encoder),
        backend_(backend),
        tok_(tokenizer),
        opt_(options),
        sink_(sink),
        progress_(progress),
        width_(pipeline_row_width(encoder, options)) {
    if (opt_.batch_tokens <= 0) throw Error(Errc::invalid_argument, "--batch-tokens: expected a positive number");
    if (opt_.max_batch_size <= 0) throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
    if (opt_.sort_window == 0) throw Error(Errc::invalid_argument, "--sort-window: expected a positive number");
    if (opt_.workers <= 0) throw Error(Errc::invalid_argument, "--workers: expected a positive number");
    if (opt_.task_count == 0 || opt_.task_index >= opt_.task_count)
      throw Error(Errc::invalid_argument, "--shard-index " + std::to_string(opt_.task_index) +
                                              ": expected 0 <= index < --num-shards " + std::to_string(opt_.task_count));
    if (opt_.chunks.on()) {
      check_chunk_settings(opt_.chunks.settings);
      if (opt_.product != RowProduct::pooled) throw Error(Errc::invalid_argument, "chunking gives pooled rows only");
      // Each chunk is a text of its own: its tokens, the prompt's and the specials fit the max length.
      check_chunks_fit(tok_, opt_.chunks, opt_.prompt, opt_.encode.max_length);
    }
    // Late chunking: a batch's spans gather at most this many token rows (a
    // batch's length counts its spans' rows too, and a macro-window's spans
    // stop at twice its tokens), and each span has at least one.
    const auto longest_text = static_cast<int64_t>(opt_.encode.max_length);
    const int64_t span_rows = opt_.chunks.late ? std::max(opt_.batch_tokens, 2 * longest_text + opt_.chunks.settings.tokens)
                                               : 0;
    const int64_t spans = opt_.chunks.late ? span_rows + opt_.max_batch_size : 0;
    const int64_t rows_per_batch = std::max(opt_.max_batch_size, spans);
    for (auto& s : slots_) s = backend_.allocate_host(static_cast<size_t>(rows_per_batch * width_) * sizeof(float));
    // The device workspace for the token budget. Out of memory halves the
    // budget and tries again (RELIABILITY 10): the workspace is the only
    // device memory a batch needs, so once it fits every batch does. A
    // batch holds at least one whole sequence, however long.
    const auto longest = static_cast<int64_t>(opt_.encode.max_length);
    int64_t& budget = stats_.batch_tokens;
    budget = opt_.batch_tokens;
    for (;;) {
      try {
        runner_ = std::make_unique<EncoderRunner>(enc_, backend_, std::max(budget, longest), opt_.max_batch_size,
                                                  kSlots, spans, span_rows);
        break;
      } catch (const OutOfMemoryError& e) {
        if (budget <= longest)
          throw Error(Errc::device, std::string(e.what()) + "; even a batch of one " + std::to_string(longest) +
                                        "-token sequence does not fit: lower --max-length, or free the device");
        budget = std::max(budget / 2, longest);
        ++stats_.memory_halvings;
      }
    }
    // Sparse / multi-vector outputs: host buffers per output slot, for the
    // batch's every token or sequence (model/text_outputs.h).
    if (opt_.extras.sparse || opt_.extras.colbert) {
      if (opt_.chunks.on())
        throw Error(Errc::unsupported, "sparse and ColBERT outputs of chunked texts: chunked runs give dense rows "
                                       "only");
      if (opt_.product != RowProduct::pooled) throw Error(Errc::invalid_argument, "sparse / ColBERT outputs go with pooled rows");
      const size_t sparse_floats =
          sparse_host_floats(enc_, opt_.extras, runner_->max_tokens(), runner_->max_sequences());
      const size_t colbert_floats = colbert_host_floats(enc_, opt_.extras, runner_->max_tokens());
      for (size_t k = 0; k < kSlots; ++k) {
        if (sparse_floats) sparse_slots_[k] = backend_.allocate_host(sparse_floats * sizeof(float));
        if (colbert_floats) colbert_slots_[k] = backend_.allocate_host(colbert_floats * sizeof(float));
      }
    }
  }

  PipelineStats run() {
    const auto t0 = Clock::now();
    start_ = t0;
    const uint64_t syncs0 = backend_.host_syncs();
    const double busy0 = backend_.busy_seconds();
    RecordReader reader(opt_.input);
    total_bytes_ = reader.total_bytes();
    // Resume: whole windows before the one holding the first uncommitted record
    // are skipped unread; that window is redone from its start so its batches
    // are the ones the first run formed.
    const uint64_t first_window = opt_.resume_record / opt_.sort_window * opt_.sort_window;
    if (first_window > 0) {
      const auto ts = Clock::now();
      const uint64_t skipped = reader.skip(first_window);
      stats_.read.busy += since(ts);
      stats_.resumed += skipped;
    }
    if (opt_.serial)
      run_serial(reader);
    else
      run_pipelined(reader);
    if (host_load_ != 0) backend_.set_host_load(0);
    if (opt_.journal) opt_.journal->sync();  // a stop keeps every finished batch, durably
    stats_.records = reader.records();
    stats_.stopped_early = stopped_early_.load(std::memory_order_relaxed);  // every stage has joined
    stats_.cancelled = cancelled_.load(std::memory_order_relaxed);
    stats_.input_sha256 = reader.sha256_so_far();
    stats_.input_bytes = reader.bytes_read();
    stats_.seconds = since(t0);
    stats_.host_syncs = backend_.host_syncs() - syncs0;
    const double busy1 = backend_.busy_seconds();
    stats_.device_busy = busy0 >= 0 && busy1 >= 0 ? busy1 - busy0 : -1;
    return stats_;
  }

 private:
  // --- stages, each on one window or batch; serial and pipelined runs share them

  // Reads the records of the next window; false at end of input.
  bool read_window(RecordReader& reader, Window& w) {
    w.first = reader.records();
    w.end = (w.first / opt_.sort_window + 1) * opt_.sort_window;
    if (opt_.max_records > 0) w.end = std::min(w.end, std::max(opt_.max_records, w.first));
    const uint64_t N = opt_.task_count, task = opt_.task_index;
    InputRecord rec;
    while (reader.records() < w.end) {
      const uint64_t r = reader.records();
      if (N > 1 && r % N != task) {
        // Other tasks' records are skipped without parsing.
        const uint64_t next_own = r + (task + N - r % N) % N;
        const uint64_t want = std::min(next_own, w.end) - r;
        const uint64_t got = reader.skip(want);
        other_tasks_ += got;
        if (got < want) break;
        continue;
      }
      if (should_stop()) break;
      if (!reader.next(rec)) break;
      bytes_read_.store(reader.bytes_read(), std::memory_order_relaxed);
      records_read_.store(reader.records(), std::memory_order_relaxed);
      if (!rec.error.empty()) {
        if (rec.index < opt_.resume_record) continue;  // an earlier run already dealt with it
        if (!opt_.skip_bad_records)
          throw Error(Errc::format,
                      describe_bad_record(reader, rec) +
                          " (--on-error skip skips bad records into an errors file and goes on)");
        w.bad.push_back(std::move(rec));
        continue;
      }
      // (Chunking keeps the text as it is: spans index it; the prompt's tokens go before each chunk.)
      if (!opt_.prompt.empty() && !opt_.chunks.on()) rec.text.insert(0, opt_.prompt);
      w.records.push_back(std::move(rec));
    }
    bytes_read_.store(reader.bytes_read(), std::memory_order_relaxed);
    records_read_.store(reader.records(), std::memory_order_relaxed);
    return reader.records() > w.first;
  }

  void tokenize_window(Window& w, ThreadPool* pool) {
    if (opt_.chunks.on()) return chunk_window(w, pool);
    const size_t n = w.records.size();
    w.encodings.resize(n);
    auto body = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i) {
        const InputRecord& r = w.records[i];
        TextInput in{r.text, std::nullopt};
        if (opt_.pairs && r.pair) in.pair = std::string_view(*r.pair);
        w.encodings[i] = text_encoding(tok_, opt_.extras, in, opt_.encode);  // a ColBERT model's form per role
      }
    };
    if (pool && n > 64)
      pool->parallel_for(n, body);
    else
      body(0, n);
  }

  // --- chunked runs (docs/pipeline.md "Long documents")

  // The file:line of a record, as describe_bad_record gives it.
  std::string record_place(const InputRecord& r) const {
    const std::string& file = opt_.input.paths.empty() ? opt_.input.path
                              : r.file < opt_.input.paths.size() ? opt_.input.paths[r.file]
                                                                 : opt_.input.paths.back();
    return (file == "-" ? std::string("<stdin>") : file) + ":" + std::to_string(r.line);
  }

  // tokenize_window for chunked runs: each record's chunks, in order.
  void chunk_window(Window& w, ThreadPool* pool) {
    const size_t n = w.records.size();
    std::vector<TextChunks> per(n);
    auto body = [&](size_t begin, size_t end) {
      for (size_t i = begin; i < end; ++i)
        per[i] = chunk_text(tok_, opt_.chunks, opt_.prompt, opt_.encode.max_length, w.records[i].text);
    };
    if (pool && n > 4)
      pool->parallel_for(n, body);
    else
      body(0, n);
    // Records that could not be chunked are bad records (kept in order).
    std::vector<InputRecord> good;
    std::vector<InputRecord> bad;
    for (size_t i = 0; i < n; ++i) {
      InputRecord& r = w.records[i];
      TextChunks& c = per[i];
      if (!c.error.empty()) {
        if (r.index < opt_.resume_record) continue;
        if (!opt_.skip_bad_records)
          throw Error(Errc::format, record_place(r) + ": " + c.error +
                                        " (--on-error skip skips bad records into an errors file and goes on)");
        r.error = c.error;
        bad.push_back(std::move(r));
        continue;
      }
      const auto record = static_cast<uint32_t>(good.size());
      const auto unit0 = static_cast<uint32_t>(w.unit_record.size());
      for (size_t s = 0; s < c.sequences.size(); ++s) {
        if (opt_.chunks.late) w.seq_units.push_back(unit0 + c.seq_first_row[s]);
        w.encodings.push_back(std::move(c.sequences[s]));
      }
      for (ChunkRow& u : c.rows) {
        w.unit_record.push_back(record);
        w.chunks.push_back(u);
      }
      w.unit_rows.insert(w.unit_rows.end(), c.row_span.begin(), c.row_span.end());
      good.push_back(std::move(r));
    }
    if (opt_.chunks.late) w.seq_units.push_back(static_cast<uint32_t>(w.unit_record.size()));
    w.records = std::move(good);
    if (!bad.empty()) {
      std::vector<InputRecord> merged;
      std::merge(std::make_move_iterator(w.bad.begin()), std::make_move_iterator(w.bad.end()),
                 std::make_move_iterator(bad.begin()), std::make_move_iterator(bad.end()), std::back_inserter(merged),
                 [](const InputRecord& a, const InputRecord& b) { return a.index < b.index; });
      w.bad = std::move(merged);
    }
  }

  // Late chunking: the batch's spans as rows of its packed tokens (members
  // in batch order, each member's units in order).
  static void late_spans(const Window& w, const std::vector<uint32_t>& members, std::vector<int32_t>& rows,
                         std::vector<int32_t>& cu) {
    rows.clear();
    cu.assign(1, 0);
    int32_t base = 0;  // the member's first token row in the packed batch
    for (uint32_t m : members) {
      const auto [first, end] = w.units_of(m);
      for (size_t u = first; u < end; ++u) {
        for (int32_t t = w.unit_rows[u].first; t < w.unit_rows[u].second; ++t) rows.push_back(base + t);
        cu.push_back(static_cast<int32_t>(rows.size()));
      }
      base += static_cast<int32_t>(w.encodings[m].ids.size());
    }
  }

  // emit for chunked runs: each record's rows (or its one pooled row) and
  // the skipped records, in record order.
  void emit_chunks(Window& w) {
    TraceSpan span(opt_.trace, "emit", "stage");
    const auto t0 = Clock::now();
    const auto W = static_cast<size_t>(width_);
    std::vector<float> pooled(W);
    size_t u = 0, j = 0;
    for (size_t i = 0; i < w.records.size() || j < w.bad.size();) {
      const bool take_row = j == w.bad.size() || (i < w.records.size() && w.records[i].index < w.bad[j].index);
      if (!take_row) {
        sink_.skipped(w.bad[j]);
        stats_.skipped++;
        ++j;
        continue;
      }
      const InputRecord& rec = w.records[i];
      size_t end = u;
      while (end < w.units() && w.record_of(end) == i) ++end;
      if (rec.index < opt_.resume_record) {
        stats_.resumed++;
      } else {
        uint64_t tokens = 0;
        for (size_t k = u; k < end; ++k) tokens += w.chunks[k].tokens;
        if (opt_.chunks.pool == ChunkPooling::none) {
          for (size_t k = u; k < end; ++k) sink_.chunk_row(rec, w.chunks[k], w.rows.data() + k * W);
          stats_.texts += end - u;
        } else {
          pool_chunk_rows(w.rows.data() + u * W, end - u, width_, opt_.chunks.pool, opt_.normalize, pooled.data());
          ChunkRow row;
          row.count = static_cast<uint32_t>(end - u);
          row.span = {w.chunks[u].span.token_begin, w.chunks[end - 1].span.token_end, w.chunks[u].span.byte_begin,
                      w.chunks[end - 1].span.byte_end, w.chunks[u].span.char_begin, w.chunks[end - 1].span.char_end};
          row.tokens = tokens;
          row.pooled = true;
          sink_.chunk_row(rec, row, pooled.data());
          stats_.texts++;
        }
        stats_.chunked_records++;
        stats_.tokens += tokens;
        stats_.replaced_utf8 += rec.replaced_utf8;
      }
      u = end;
      ++i;
    }
    stats_.windows++;
    stats_.write.busy += since(t0);
    report_progress();
  }

  // each_batch(members, ordinal) for the window's batches, in the order they run.
  template <typename EachBatch>
  void for_each_batch(const Window& w, EachBatch&& each_batch) {
    std::vector<int64_t> lengths(w.encodings.size());
    for (size_t i = 0; i < lengths.size(); ++i) lengths[i] = static_cast<int64_t>(w.encodings[i].ids.size());
    // Late chunking: the spans' gathered rows count too (they take workspace as tokens do).
    if (!w.seq_units.empty())
      for (size_t i = 0; i < lengths.size(); ++i) {
        int64_t rows = 0;
        const auto [first, end] = w.units_of(i);
        for (size_t u = first; u < end; ++u) rows += w.unit_rows[u].second - w.unit_rows[u].first;
        lengths[i] = std::max(lengths[i], rows);
      }
    uint32_t ordinal = 0;
    for (auto& members : cut_batches(lengths, stats_.batch_tokens, opt_.max_batch_size))
      each_batch(std::move(members), ordinal++);
  }

  // The window's key in the journal: its first record number (windows are
  // fixed ranges, so it is a multiple of the window size).
  uint64_t window_key(const Window& w) const { return w.first / opt_.sort_window * opt_.sort_window; }

  // The record number of each row a batch gives, in order (a chunked
  // record's number once per chunk): what the journal keys its rows by.
  static std::vector<uint64_t> records_of(const Window& w, const std::vector<uint32_t>& members) {
    std::vector<uint64_t> r;
    r.reserve(members.size());
    for (uint32_t m : members) {
      const auto [first, end] = w.units_of(m);
      for (size_t u = first; u < end; ++u) r.push_back(w.records[w.record_of(u)].index);
    }
    return r;
  }

  // The batch `ordinal` of window `w` as a job, and whether it must run
  // (with its kept rows when an earlier run left them).
  BatchNeed plan(const WindowPtr& w, std::vector<uint32_t> members, uint32_t ordinal, BatchJob& job) {
    job.window = w;
    job.members = std::move(members);
    job.ordinal = ordinal;
    return need_of(*w, job, job.kept_rows);
  }

  BatchNeed need_of(const Window& w, const BatchJob& job, std::shared_ptr<std::vector<float>>& kept) {
    const std::vector<uint64_t> records = records_of(w, job.members);
    bool all_committed = true;
    for (uint64_t r : records) all_committed = all_committed && r < opt_.resume_record;
    if (all_committed) return BatchNeed::nothing;
    if (!opt_.journal) return BatchNeed::compute;
    auto rows = std::make_shared<std::vector<float>>(records.size() * static_cast<size_t>(width_));
    if (!opt_.journal->lookup(window_key(w), job.ordinal, records, rows->data())) return BatchNeed::compute;
    kept = std::move(rows);
    stats_.kept_rows += records.size();
    return BatchNeed::kept;
  }

  void pack(const Window& w, const std::vector<uint32_t>& members, PackedBatch& batch) {
    batch.clear();
    for (uint32_t m : members) batch.add(w.encodings[m].ids, w.encodings[m].type_ids, enc_.config);
  }

  // Enqueues a packed batch into an output slot; returns at once.
  BatchJob submit(WindowPtr w, std::vector<uint32_t> members, const PackedBatch& batch, size_t slot, uint32_t ordinal) {
    EncoderOutputs out;
    auto* dst = static_cast<float*>(slots_[slot]->data());
    if (opt_.product == RowProduct::pooled) {
      out.pooled = dst;
      out.pooling = opt_.pooling;
      out.normalize = opt_.normalize;
      out.dims = width_;
    } else {
      out.logits = dst;
    }
    if (!w->seq_units.empty()) {
      late_spans(*w, members, span_rows_, span_cu_);
      out.span_rows = span_rows_;
      out.span_cu = span_cu_;
      // CLS and last-token pooling read one token of a sequence: a chunk's
      // span pools the mean of its tokens instead (as Jina's late chunking).
      if (out.pooling == Pooling::cls || out.pooling == Pooling::lasttoken) out.pooling = Pooling::mean;
    }
    set_text_output_destinations(enc_, opt_.extras, out, host_floats(sparse_slots_[slot]), host_floats(colbert_slots_[slot]));
    text_key_lens(opt_.extras, batch.ids, batch.cu_seqlens, key_lens_);  // ColBERT queries: expansion tokens no keys
    out.key_lens = key_lens_;
    BatchJob job;
    job.done = runner_->run(batch, out);
    job.window = std::move(w);
    job.members = std::move(members);
    job.slot = slot;
    job.ordinal = ordinal;
    stats_.batches++;
    stats_.submitted_texts += job.members.size();
    stats_.computed_tokens += static_cast<uint64_t>(batch.tokens());
    for (uint32_t m : job.members) stats_.real_tokens += job.window->encodings[m].ids.size();
    return job;
  }

  // The writer's half of a batch: wait for its results (the one host sync per
  // batch) and put each row where its record sits in the window.
  // A batch whose rows an earlier run kept has no event: its rows are at hand.
  void collect(const BatchJob& job) {
    const auto t0 = Clock::now();
    if (!job.kept_rows) {
      TraceSpan span(opt_.trace, "wait result", "sync");
      backend_.wait(*job.done);
    }
    stats_.result_wait += since(t0);
    const auto t1 = Clock::now();
    const auto* src = job.kept_rows ? job.kept_rows->data() : static_cast<const float*>(slots_[job.slot]->data());
    Window& w = *job.window;
    if (opt_.journal && !job.kept_rows) opt_.journal->record(window_key(w), job.ordinal, records_of(w, job.members), src);
    if (w.rows.empty()) w.rows.resize(w.units() * static_cast<size_t>(width_));
    const size_t row_bytes = static_cast<size_t>(width_) * sizeof(float);
    uint64_t tokens = 0, fresh = 0;
    size_t r = 0;  // the batch's rows, in order: each member's units
    for (uint32_t m : job.members) {
      const auto [first, end] = w.units_of(m);
      for (size_t u = first; u < end; ++u, ++r)
        std::memcpy(w.rows.data() + u * static_cast<size_t>(width_), src + r * static_cast<size_t>(width_), row_bytes);
      // Rows an earlier run committed are not counted again (resume progress).
      if (w.records[w.record_of(first)].index < opt_.resume_record) continue;
      tokens += w.encodings[m].ids.size();
      fresh += end - first;
    }
    if (!job.kept_rows && (opt_.extras.sparse || opt_.extras.colbert)) collect_extras(job, w);
    // Progress counters are shared with the progress reader: once per batch, not per row.
    rows_done_.fetch_add(fresh, std::memory_order_relaxed);
    crash_point("batch-collected");  // tests act mid-run here (STOKE_STOP_AT=batch-collected:n)
    tokens_done_.fetch_add(tokens, std::memory_order_relaxed);
    stats_.write.busy += since(t1);
  }

  // The sparse / multi-vector outputs of a collected batch: each member's
  // out of the slot's host buffers (members in batch order, their tokens one
  // after another).
  void collect_extras(const BatchJob& job, Window& w) {
    w.extras.resize(w.records.size());
    const float* sparse = host_floats(sparse_slots_[job.slot]);
    const float* colbert = host_floats(colbert_slots_[job.slot]);
    int64_t first = 0, sequence = 0;
    for (uint32_t m : job.members) {
      const std::vector<int32_t>& ids = w.encodings[m].ids;
      w.extras[m] = text_extras(enc_, opt_.extras, ids, first, sequence++, sparse, colbert);
      first += static_cast<int64_t>(ids.size());
    }
  }

  static float* host_floats(const std::unique_ptr<Buffer>& b) { return b ? static_cast<float*>(b->data()) : nullptr; }

  // Rows and skipped records to the sink, merged in record order.
  void emit(Window& w) {
    if (opt_.chunks.on()) return emit_chunks(w);
    TraceSpan span(opt_.trace, "emit", "stage");
    const auto t0 = Clock::now();
    size_t i = 0, j = 0;
    while (i < w.records.size() || j < w.bad.size()) {
      const bool take_row = j == w.bad.size() || (i < w.records.size() && w.records[i].index < w.bad[j].index);
      if (take_row) {
        const InputRecord& rec = w.records[i];
        const Encoding& enc = w.encodings[i];
        if (rec.index < opt_.resume_record) {
          stats_.resumed++;
        } else {
          const float* row = w.rows.data() + i * static_cast<size_t>(width_);
          if (opt_.extras.sparse || opt_.extras.colbert) {
            RowExtras extras;
            extras.sparse_ids = w.extras[i].sparse.ids;
            extras.sparse_values = w.extras[i].sparse.weights;
            extras.colbert = w.extras[i].colbert;
            sink_.row_with_extras(rec, enc, row, extras);
          } else {
            sink_.row(rec, enc, row);
          }
          stats_.texts++;
          stats_.tokens += enc.ids.size();
          stats_.truncated += enc.truncated ? 1 : 0;
          stats_.replaced_utf8 += rec.replaced_utf8;
        }
        ++i;
      } else {
        sink_.skipped(w.bad[j]);
        stats_.skipped++;
        ++j;
      }
    }
    stats_.windows++;
    stats_.write.busy += since(t0);
    report_progress();
  }

  void report_progress() {
    if (!progress_) return;
    PipelineProgress p;
    p.records = records_read_.load(std::memory_order_relaxed);
    p.texts = rows_done_.load(std::memory_order_relaxed);
    p.tokens = tokens_done_.load(std::memory_order_relaxed);
    p.bytes_read = bytes_read_.load(std::memory_order_relaxed);
    p.total_bytes = total_bytes_;
    progress_(p);
  }

  // --- the two ways to run the stages

  // One stage at a time, as a plain loop would (sentence-transformers' encode):
  // read, tokenize, then for each batch enqueue and wait; the comparison for
  // what the pipeline hides.
  void run_serial(RecordReader& reader) {
    PackedBatch batch;
    for (;;) {
      auto w = std::make_shared<Window>();
      auto t = Clock::now();
      if (!read_window(reader, *w)) break;
      stats_.read.busy += since(t);
      t = Clock::now();
      tokenize_window(*w, nullptr);
      stats_.tokenize.busy += since(t);
      for_each_batch(*w, [&](std::vector<uint32_t> members, uint32_t ordinal) {
        if (cancel_seen()) return;  // (a profile's deadline lets the window in hand finish, as before)
        BatchJob job;
        const BatchNeed need = plan(w, std::move(members), ordinal, job);
        if (need == BatchNeed::nothing) return;
        if (need == BatchNeed::compute) {
          const auto tb = Clock::now();
          pack(*w, job.members, batch);
          job = submit(w, std::move(job.members), batch, 0, ordinal);
          stats_.batch.busy += since(tb);
        }
        collect(job);
        report_progress();
      });
      if (cancelled_.load(std::memory_order_relaxed)) break;  // the window in hand is not whole: not emitted
      emit(*w);
    }
    stats_.other_tasks = other_tasks_;
  }

  // The queues between the stages of a pipelined run, and the first error a
  // stage hit. fail() records it and aborts every queue, so each stage
  // returns from its next push or pop and the run unwinds.
  struct Stages {
    Stages() : read_q(2), token_q(2), result_q(kSlots + 2), free_slots(kSlots) {
      for (size_t s = 0; s < kSlots; ++s) free_slots.push(s);
    }
    void fail(std::exception_ptr e) {
      {
        std::lock_guard lock(error_mu);
        if (!error) error = e;
      }
      read_q.abort();
      token_q.abort();
      result_q.abort();
      free_slots.abort();
    }
    BoundedQueue<WindowPtr> read_q, token_q;
    BoundedQueue<BatchJob> result_q;
    BoundedQueue<size_t> free_slots;  // output slots the device may write into
    std::mutex error_mu;
    std::exception_ptr error;  // under error_mu until the stages have joined
  };

  void run_pipelined(RecordReader& reader) {
    Stages st;
    std::thread reader_thread([&] { reader_stage(reader, st); });
    std::thread tokenizer_thread([&] { tokenizer_stage(st); });
    std::thread writer_thread([&] { writer_stage(st); });
    executor_stage(st);  // this thread
    reader_thread.join();
    tokenizer_thread.join();
    writer_thread.join();
    stats_.other_tasks = other_tasks_;
    stats_.read.wait_output = st.read_q.push_wait_seconds();
    stats_.tokenize.wait_input = st.read_q.pop_wait_seconds();
    stats_.tokenize.wait_output = st.token_q.push_wait_seconds();
    stats_.batch.wait_input = st.token_q.pop_wait_seconds();
    stats_.write.wait_input = st.result_q.pop_wait_seconds();
    if (st.error) {
      // Work already enqueued may still write into the slots: let it finish
      // before they go (drain never throws and is not a counted sync).
      backend_.drain();
      std::rethrow_exception(st.error);
    }
  }

  // Reads windows until the input ends (or the deadline passes).
  void reader_stage(RecordReader& reader, Stages& st) {
    if (opt_.trace) opt_.trace->name_thread("reader");
    if (opt_.on_thread_start) opt_.on_thread_start("reader");
    try {
      for (;;) {
        auto w = std::make_shared<Window>();
        const auto t = Clock::now();
        bool more;
        {
          TraceSpan span(opt_.trace, "read");
          more = read_window(reader, *w);
        }
        stats_.read.busy += since(t);
        if (!more || !st.read_q.push(std::move(w))) break;
      }
      st.read_q.close();
    } catch (...) {
      st.fail(std::current_exception());
    }
  }

  // Tokenizes each window on a pool of `workers` threads: this one and
  // workers - 1 helpers.
  void tokenizer_stage(Stages& st) {
    if (opt_.trace) opt_.trace->name_thread("tokenizer-0");
    try {
      if (opt_.on_thread_start) opt_.on_thread_start("tokenizer-0");
      std::unique_ptr<ThreadPool> pool;
      if (opt_.workers > 1)
        pool = std::make_unique<ThreadPool>(static_cast<size_t>(opt_.workers), [this](size_t i) {
          if (opt_.trace) opt_.trace->name_thread("tokenizer-" + std::to_string(i));
          if (opt_.on_thread_start) opt_.on_thread_start("tokenizer-" + std::to_string(i));
        });
      while (auto w = st.read_q.pop()) {
        const auto t = Clock::now();
        {
          TraceSpan span(opt_.trace, "tokenize");
          tokenizing_.store(true, std::memory_order_relaxed);
          tokenize_window(**w, pool.get());
          tokenizing_.store(false, std::memory_order_relaxed);
        }
        stats_.tokenize.busy += since(t);
        if (!st.token_q.push(std::move(*w))) break;
      }
      st.token_q.close();
    } catch (...) {
      st.fail(std::current_exception());
    }
  }

  // Collects each batch's results (waiting on their events) and emits each
  // window's rows once its end marker comes, freeing output slots as it goes.
  void writer_stage(Stages& st) {
    if (opt_.trace) opt_.trace->name_thread("writer");
    if (opt_.on_thread_start) opt_.on_thread_start("writer");
    try {
      while (auto job = st.result_q.pop()) {
        if (job->window_end) {
          emit(*job->window);
          continue;
        }
        collect(*job);
        job->window.reset();
        if (!job->kept_rows) st.free_slots.push(job->slot);
        report_progress();
      }
    } catch (...) {
      st.fail(std::current_exception());
    }
  }

  // The executor: cuts each tokenized window into batches and enqueues them
  // on the device, each into a free output slot, then the window's end marker.
  void executor_stage(Stages& st) {
    if (opt_.trace) opt_.trace->name_thread("batcher");
    if (opt_.on_thread_start) opt_.on_thread_start("batcher");
    try {
      PackedBatch batch;
      // Did the batcher have to wait for this window? Then tokenization is
      // the bottleneck, and the device leaves the tokenizer its cores while
      // it works; a window that was ready means the device is the bottleneck
      // and keeps every core. (The first window is always waited for: that
      // is the pipeline filling, not a slow tokenizer.)
      for (uint64_t window = 0;; ++window) {
        const double waited_before = st.token_q.pop_wait_seconds();
        auto w = st.token_q.pop();
        if (!w) break;
        const bool starved = window > 0 && st.token_q.pop_wait_seconds() - waited_before > 1e-3;
        if (!enqueue_window(*w, starved, batch, st)) {
          stopped_early_.store(true, std::memory_order_relaxed);
          st.read_q.abort();  // the reader and the tokenizer stop where they are
          st.token_q.abort();
          break;
        }
        BatchJob end;
        end.window = std::move(*w);
        end.window_end = true;
        if (!st.result_q.push(std::move(end))) throw Aborted{};
      }
      st.result_q.close();
    } catch (const Aborted&) {
    } catch (...) {
      st.fail(std::current_exception());
    }
  }

  // Whether the caller cancelled (a stop); records it.
  bool cancel_seen() {
    if (!opt_.cancel || !opt_.cancel->load(std::memory_order_relaxed)) return false;
    stopped_early_.store(true, std::memory_order_relaxed);
    // Tests stop the process here (STOKE_STOP_AT=stopping:1) to signal it again mid-stop.
    if (!cancelled_.exchange(true, std::memory_order_relaxed)) crash_point("stopping");
    return true;
  }

  // Whether a profile's deadline (stop_after_seconds) has passed or the
  // caller cancelled; records why. Checked per record and per batch: a
  // relaxed load and, with a deadline, a clock read.
  bool should_stop() {
    if (cancel_seen()) return true;
    if (opt_.stop_after_seconds > 0 && since(start_) > opt_.stop_after_seconds) {
      stopped_early_.store(true, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  // Enqueues every batch of window `w`; false when a profile's deadline
  // (stop_after_seconds) passed or the run was cancelled first: then no more
  // batches are enqueued and the window in hand is dropped unwritten (its
  // rows would be incomplete).
  bool enqueue_window(const WindowPtr& w, bool starved, PackedBatch& batch, Stages& st) {
    bool cancelled = false;
    for_each_batch(*w, [&](std::vector<uint32_t> members, uint32_t ordinal) {
      if (cancelled || (cancelled = should_stop())) return;
      BatchJob kept;
      const BatchNeed need = plan(w, std::move(members), ordinal, kept);
      if (need == BatchNeed::nothing) return;
      if (need == BatchNeed::kept) {
        if (!st.result_q.push(std::move(kept))) throw Aborted{};
        return;
      }
      members = std::move(kept.members);
      auto t = Clock::now();
      {
        TraceSpan span(opt_.trace, "pack");
        pack(*w, members, batch);  // packed before a slot frees: ready the moment one does
      }
      stats_.batch.busy += since(t);
      const auto tw = Clock::now();
      auto slot = st.free_slots.pop();
      stats_.batch.wait_output += since(tw);
      if (!slot) throw Aborted{};
      t = Clock::now();
      // While a tokenizer that holds the device back works, the device
      // computes on the cores it leaves.
      const int load = starved && tokenizing_.load(std::memory_order_relaxed) ? opt_.workers : 0;
      if (load != host_load_) {
        backend_.set_host_load(load);
        host_load_ = load;
      }
      BatchJob job;
      {
        TraceSpan span(opt_.trace, "enqueue");
        job = submit(w, std::move(members), batch, *slot, ordinal);
      }
      stats_.batch.busy += since(t);
      if (opt_.debug_sync_each_batch) {
        TraceSpan span(opt_.trace, "debug sync", "sync");
        backend_.synchronize();
      }
      if (!st.result_q.push(std::move(job))) throw Aborted{};
    });
    return !cancelled;
  }

  const LoadedEncoder& enc_;
  Clock::time_point start_ = Clock::now();  // the deadline of stop_after_seconds counts from here
  std::atomic<bool> tokenizing_{false};     // the tokenizer thread is inside a window
  // The deadline cut the input short. Atomic because two threads set it at
  // once in a pipelined run: the reader (read_window, no more records) and the
  // executor (a batch past the deadline) check the same clock, and both may
  // see it pass; two plain writes of one bool are a data race even when both
  // write true (TSan reports it, and the compiler may assume it cannot
  // happen). Relaxed is enough: it orders nothing, and run() reads it into
  // stats_ only after every stage thread has joined.
  std::atomic<bool> stopped_early_{false};
  std::atomic<bool> cancelled_{false};      // the cancel flag was seen (as stopped_early_, relaxed)
  int host_load_ = 0;                       // what the backend was last told (executor thread only)
  Backend& backend_;
  const Tokenizer& tok_;
  const EncodePipelineOptions& opt_;
  RowSink& sink_;
  const std::function<void(const PipelineProgress&)>& progress_;
  int64_t width_;
  std::array<std::unique_ptr<Buffer>, kSlots> slots_;  // before the runner: freed after it drained
  std::vector<int32_t> span_rows_, span_cu_;           // late chunking: the batch being enqueued's spans
  std::vector<int32_t> key_lens_;  // the batch being submitted's attention key counts (run() copies them)
  std::array<std::unique_ptr<Buffer>, kSlots> sparse_slots_, colbert_slots_;  // sparse / multi-vector outputs per slot
  std::unique_ptr<EncoderRunner> runner_;
  PipelineStats stats_;
  uint64_t other_tasks_ = 0, total_bytes_ = 0;
  std::atomic<uint64_t> bytes_read_{0}, records_read_{0}, rows_done_{0}, tokens_done_{0};
};

}  // namespace

void RowSink::row_with_extras(const InputRecord& record, const Encoding& encoding, const float* values,
                              const RowExtras& extras) {
  (void)extras;
  row(record, encoding, values);
}

void RowSink::chunk_row(const InputRecord& record, const ChunkRow& chunk, const float* values) {
  (void)record;
  (void)chunk;
  (void)values;
  throw Error(Errc::internal, "this output takes no chunked rows");
}

int64_t pipeline_row_width(const LoadedEncoder& encoder, const EncodePipelineOptions& options) {
  const int64_t H = encoder.sentence_width();  // the hidden size, or the Dense modules' out_features
  // Token rows (len_i per text) come from the request batcher; this pipeline's
  // slots, sinks and journal hold one fixed-width row per text.
  if (options.product == RowProduct::tokens)
    throw Error(Errc::invalid_argument, "the encode pipeline makes pooled or logits rows, not token rows");
  if (options.product == RowProduct::logits) return encoder.config.num_labels();
  if (options.dims < 0) throw Error(Errc::invalid_argument, "--dimensions: expected a positive number");
  if (options.dims > H)
    throw Error(Errc::invalid_argument, "--dimensions " + std::to_string(options.dims) + " is more than the model's " +
                                            std::to_string(H) + " hidden size");
  return options.dims > 0 ? options.dims : H;
}

std::string memory_halving_note(const PipelineStats& stats, int64_t asked_batch_tokens) {
  return "the device had no room for --batch-tokens " + std::to_string(asked_batch_tokens) + ": ran with " +
         std::to_string(stats.batch_tokens) + " (halved " + std::to_string(stats.memory_halvings) + " times)";
}

PipelineStats run_encode_pipeline(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                                  const EncodePipelineOptions& options, RowSink& sink,
                                  const std::function<void(const PipelineProgress&)>& progress) {
  Pipeline pipeline(encoder, backend, tokenizer, options, sink, progress);
  return pipeline.run();
}

}  // namespace stoke
