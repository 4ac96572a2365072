#include "pipeline/request_batcher.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <thread>

#include "core/error.h"
#include "core/trace.h"
#include "pipeline/bounded_queue.h"
#include "pipeline/bucketer.h"

namespace stoke {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Output slots: batches enqueued and not yet collected. Three keeps the
// device fed while the collector reads one result and the executor enqueues
// the next (as in the embed pipeline).
constexpr size_t kSlots = 3;

// A tokenization task: texts [begin, end) of one request. A big request is
// split so every worker takes a share.
struct TokenizeChunk {
  std::shared_ptr<BatchRequest> request;
  size_t begin = 0, end = 0;
};
constexpr size_t kMinChunkTexts = 64;

// One text of a generation: which request, which of its texts.
struct Member {
  std::shared_ptr<BatchRequest> request;
  uint32_t index = 0;
};

// Whether two requests' texts may share a batch: the same product and the
// same sparse / multi-vector settings (the role changes how texts run).
bool same_generation(const BatchRequestOptions& a, const BatchRequestOptions& b) {
  return a.product == b.product && a.extras.sparse == b.extras.sparse && a.extras.colbert == b.extras.colbert &&
         a.extras.role == b.extras.role && a.extras.sparse_top_k == b.extras.sparse_top_k;
}

bool wants_extras(const BatchRequestOptions& o) { return o.extras.sparse || o.extras.colbert; }

struct BatchJob {
  std::vector<Member> members;
  RowProduct product = RowProduct::pooled;
  TextOutputSettings extras;  // the generation's (same_generation)
  size_t slot = 0;
  int64_t tokens = 0;
  std::shared_ptr<Event> done;
};

}  // namespace

// The batcher's count of open requests and queued texts (stop() waits on it).
// `uncollected_texts` of a cancelled request never reached the device.
void request_finished(RequestBatcherState& owner, size_t uncollected_texts, bool cancelled);

// ---------------------------------------------------------------- BatchRequest

BatchRequest::State BatchRequest::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return state_ != State::queued; });
  return state_;
}

BatchRequest::State BatchRequest::wait_for(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, timeout, [&] { return state_ != State::queued; });
  return state_;
}

BatchRequest::State BatchRequest::state() const {
  std::lock_guard lock(mu_);
  return state_;
}

std::exception_ptr BatchRequest::error() const {
  std::lock_guard lock(mu_);
  return error_;
}

void BatchRequest::cancel() {
  bool finish_now = false;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::queued || cancelled_) return;
    cancelled_ = true;
    // Texts still queued are dropped by the batcher when it reaches them;
    // texts on the device finish first (their rows land in `values`).
    finish_now = in_flight_ == 0;
  }
  if (finish_now) finish(State::cancelled);
}

void BatchRequest::finish(State state, std::exception_ptr error) {
  std::function<void(BatchRequest&)> on_done;
  RequestBatcherState* owner;
  size_t uncollected;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::queued) return;
    state_ = state;
    error_ = error;
    on_done = std::move(on_done_);
    on_done_ = nullptr;
    if (started_) inference_seconds = seconds_between(started_at_, Clock::now());
    owner = owner_;
    uncollected = texts_ - collected_;
  }
  if (on_done) on_done(*this);
  {
    // Notified after the callback, so a waiter never sees the request done
    // before its callback has run (a server answers from the callback).
    std::lock_guard lock(mu_);
    cv_.notify_all();
  }
  if (owner) request_finished(*owner, uncollected, state == State::cancelled);
}

// ---------------------------------------------------------------- the batcher

struct RequestBatcherState {
  RequestBatcherState(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                      const RequestBatcherOptions& options)
      : enc(encoder), backend(backend), tok(tokenizer), opt(options),
        sources(text_output_sources(encoder, tokenizer.vocab_size())), free_slots(kSlots), done_q(kSlots + 2) {}

  const LoadedEncoder& enc;
  Backend& backend;
  const Tokenizer& tok;
  const RequestBatcherOptions opt;
  const TextOutputSources sources;  // what the model gives beside (or instead of) pooled rows
  Clock::time_point started = Clock::now();
  uint64_t syncs0 = 0;
  double busy0 = -1;

  std::unique_ptr<EncoderRunner> runner;
  int64_t batch_tokens = 0;
  struct Slot {
    std::unique_ptr<Buffer> rows;    // max_batch_size x max(sentence width, labels)
    std::unique_ptr<Buffer> hidden;  // tokens x H, made on the first token-vectors batch
    // Sparse / multi-vector raw outputs (model/text_outputs.h), made on the
    // first batch that asks, grown when a later one needs more.
    std::unique_ptr<Buffer> sparse, colbert;
    size_t sparse_floats = 0, colbert_floats = 0;
  };
  static float* host_floats(const std::unique_ptr<Buffer>& b) { return b ? static_cast<float*>(b->data()) : nullptr; }
  std::array<Slot, kSlots> slots;
  BoundedQueue<size_t> free_slots;
  BoundedQueue<BatchJob> done_q;

  // Tokenization tasks and requests ready to batch, under mu.
  std::mutex mu;
  std::condition_variable work_cv;     // tokenizers: a chunk came
  std::condition_variable pending_cv;  // executor: a request is ready, or stopping
  std::condition_variable idle_cv;     // stop(): everything finished
  std::deque<TokenizeChunk> chunks;
  std::deque<std::shared_ptr<BatchRequest>> pending;
  struct DeviceTask {
    std::function<void(Backend&)> fn;
    std::function<void(std::exception_ptr)> on_done;
  };
  std::deque<DeviceTask> device_tasks;  // run_on_device: run by the executor before its next generation
  size_t open_requests = 0;  // submitted and not finished (stop() waits for none)
  bool stopping = false;     // no new requests
  bool quitting = false;     // threads end
  std::exception_ptr broken; // a device error: every request fails with it

  std::function<void(int64_t, int64_t)> observer;  // under mu
  std::atomic<uint64_t> requests{0}, texts{0}, tokens{0}, batches{0}, cancelled_texts{0}, queued_texts{0};

  std::vector<std::thread> threads;

  // ------------------------------------------------------------ helpers

  int64_t row_width(RowProduct p) const {
    switch (p) {
      case RowProduct::pooled: return sources.dense ? enc.sentence_width() : 0;  // no dense vector: extras only
      case RowProduct::logits: return enc.config.num_labels();
      case RowProduct::tokens: return enc.config.hidden_size;
    }
    return 0;
  }

  void complete(const std::shared_ptr<BatchRequest>& r, BatchRequest::State state, std::exception_ptr error = nullptr) {
    r->finish(state, error);
  }

  // The request's counters say it has nothing left to do.
  void maybe_finish(const std::shared_ptr<BatchRequest>& r) {
    bool finish = false, cancelled = false;
    {
      std::lock_guard lock(r->mu_);
      finish = r->unbatched_ == 0 && r->in_flight_ == 0 && r->chunks_left_ == 0;
      cancelled = r->cancelled_;
    }
    if (finish) complete(r, cancelled ? BatchRequest::State::cancelled : BatchRequest::State::done);
  }

  void thread_started(const std::string& name) {
    if (opt.trace) opt.trace->name_thread(name);
    if (opt.on_thread_start) opt.on_thread_start(name);
  }

  // ------------------------------------------------------------ tokenizers

  void tokenizer_loop(size_t worker) {
    thread_started("batcher-tokenizer-" + std::to_string(worker));
    for (;;) {
      TokenizeChunk chunk;
      {
        std::unique_lock lock(mu);
        work_cv.wait(lock, [&] { return quitting || !chunks.empty(); });
        if (chunks.empty()) return;
        chunk = std::move(chunks.front());
        chunks.pop_front();
      }
      tokenize(chunk);
    }
  }

  void tokenize(const TokenizeChunk& chunk) {
    BatchRequest& r = *chunk.request;
    std::exception_ptr error;
    bool cancelled;
    {
      std::lock_guard lock(r.mu_);
      cancelled = r.cancelled_ || r.state_ != BatchRequest::State::queued;
    }
    if (!cancelled) {
      TraceSpan span(opt.trace, "tokenize");
      span.set_arg(static_cast<int64_t>(chunk.end - chunk.begin));
      try {
        for (size_t i = chunk.begin; i < chunk.end; ++i) r.encodings_[i] = encode_item(r, i);
      } catch (...) {
        error = std::current_exception();
      }
    }
    bool last;
    {
      std::lock_guard lock(r.mu_);
      last = --r.chunks_left_ == 0;
    }
    if (error) complete(chunk.request, BatchRequest::State::failed, error);
    if (last) tokenized(chunk.request);
  }

  Encoding encode_item(const BatchRequest& r, size_t i) const {
    const BatchItem& item = r.items_[i];
    const size_t max_length = opt.encode.max_length;
    Encoding e;
    if (item.ids) {
      e.ids = *item.ids;
      if (e.ids.empty())
        throw Error(Errc::invalid_argument, "input " + std::to_string(i) + ": expected at least one token id");
      for (int32_t id : e.ids)
        if (id < 0 || id >= tok.vocab_size())
          throw Error(Errc::invalid_argument, "input " + std::to_string(i) + ": token id " + std::to_string(id) +
                                                  " is outside the model's vocabulary (0.." +
                                                  std::to_string(tok.vocab_size() - 1) + ")");
      e.type_ids.assign(e.ids.size(), 0);
    } else {
      std::string prefixed;
      std::string_view text = item.text;
      if (!r.options_.prompt.empty()) {
        prefixed = r.options_.prompt + item.text;
        text = prefixed;
      }
      TextInput in{text, std::nullopt};
      if (item.pair) in.pair = std::string_view(*item.pair);
      EncodeOptions eo = opt.encode;
      eo.truncate = r.options_.truncate;
      eo.truncate_left = r.options_.truncate_left;
      e = text_encoding(tok, r.options_.extras, in, eo);  // a ColBERT model's form for the request's role
    }
    if (max_length > 0 && e.ids.size() > max_length) {
      if (!r.options_.truncate)
        throw InputTooLongError("input " + std::to_string(i) + " has " + std::to_string(e.ids.size()) +
                                " tokens, more than the maximum length " + std::to_string(max_length));
      // Token ids given as they are: cut like a text, at the end asked for.
      if (r.options_.truncate_left)
        e.ids.erase(e.ids.begin(), e.ids.end() - static_cast<std::ptrdiff_t>(max_length));
      else
        e.ids.resize(max_length);
      e.type_ids.resize(max_length);
      e.truncated = true;
    }
    return e;
  }

  // All of a request's texts are tokenized: size its results, queue it.
  void tokenized(const std::shared_ptr<BatchRequest>& rp) {
    BatchRequest& r = *rp;
    const size_t n = r.items_.size();
    {
      std::lock_guard lock(r.mu_);
      if (r.state_ != BatchRequest::State::queued || r.cancelled_) {
        r.unbatched_ = 0;
      } else {
        r.tokenized_ = Clock::now();
        r.tokenize_seconds = seconds_between(r.submitted_, r.tokenized_);
        r.width = row_width(r.options_.product);
        r.token_counts.resize(n);
        r.truncated.resize(n);
        uint64_t total = 0;
        for (size_t i = 0; i < n; ++i) {
          r.token_counts[i] = static_cast<int32_t>(r.encodings_[i].ids.size());
          r.truncated[i] = r.encodings_[i].truncated ? 1 : 0;
          total += r.encodings_[i].ids.size();
        }
        r.total_tokens = total;
        if (r.options_.product == RowProduct::tokens) {
          r.row_offsets.resize(n + 1);
          r.row_offsets[0] = 0;
          for (size_t i = 0; i < n; ++i) r.row_offsets[i + 1] = r.row_offsets[i] + r.token_counts[i];
          r.values.resize(static_cast<size_t>(r.row_offsets[n] * r.width));
        } else if (r.width > 0) {
          r.values.resize(n * static_cast<size_t>(r.width));
        }
        if (wants_extras(r.options_)) r.extras.resize(n);
        r.items_ = {};  // the texts are no longer needed
      }
    }
    bool queue;
    {
      std::lock_guard lock(r.mu_);
      queue = r.state_ == BatchRequest::State::queued && !r.cancelled_;
    }
    if (!queue) {
      maybe_finish(rp);
      return;
    }
    std::exception_ptr refusal;
    {
      std::lock_guard lock(mu);
      if (broken)
        refusal = broken;  // the executor has stopped: nothing would run it
      else
        pending.push_back(rp);
    }
    if (refusal)
      complete(rp, BatchRequest::State::failed, refusal);
    else
      pending_cv.notify_one();
  }

  // ------------------------------------------------------------ executor

  // Takes the next generation: whole requests in FIFO order, all of the first
  // one's product, up to generation_texts texts (always at least one
  // request). Waits for requests; empty only when quitting.
  std::vector<std::shared_ptr<BatchRequest>> next_generation() {
    std::unique_lock lock(mu);
    pending_cv.wait(lock, [&] { return quitting || !pending.empty() || !device_tasks.empty(); });
    run_device_tasks(lock);
    if (pending.empty()) return {};
    // Whether the device is idle now that a request is here (not when the
    // executor began waiting: the last batch was on the device then).
    const bool device_idle = in_flight_batches.load() == 0;
    if (opt.max_wait_seconds > 0 && device_idle && !stopping) {
      // The device is idle and little is queued: wait a moment for more, so
      // a trickle of one-text requests still forms batches.
      const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                               std::chrono::duration<double>(opt.max_wait_seconds));
      auto queued_tokens = [&] {
        uint64_t t = 0;
        for (auto& r : pending) t += r->total_tokens;
        return t;
      };
      while (!quitting && !stopping && queued_tokens() * 2 < static_cast<uint64_t>(batch_tokens) &&
             pending_cv.wait_until(lock, deadline) != std::cv_status::timeout) {
      }
    }
    std::vector<std::shared_ptr<BatchRequest>> generation;
    const BatchRequestOptions first = pending.front()->options_;
    uint64_t texts_taken = 0;
    for (auto it = pending.begin(); it != pending.end();) {
      const uint64_t n = (*it)->encodings_.size();
      if (!same_generation((*it)->options_, first)) {
        ++it;
        continue;
      }
      if (!generation.empty() && texts_taken + n > opt.generation_texts) break;
      texts_taken += n;
      generation.push_back(std::move(*it));
      it = pending.erase(it);
    }
    return generation;
  }

  // The tasks queued by run_on_device, each run with the lock released.
  void run_device_tasks(std::unique_lock<std::mutex>& lock) {
    while (!device_tasks.empty()) {
      DeviceTask task = std::move(device_tasks.front());
      device_tasks.pop_front();
      lock.unlock();
      std::exception_ptr error;
      try {
        task.fn(backend);
      } catch (...) {
        error = std::current_exception();
      }
      task.on_done(error);
      lock.lock();
    }
  }

  void executor_loop() {
    thread_started("batcher-executor");
    PackedBatch batch;
    for (;;) {
      auto generation = next_generation();
      if (generation.empty()) {
        std::unique_lock lock(mu);
        if (!quitting) continue;  // it woke for device tasks only
        std::deque<DeviceTask> left;
        left.swap(device_tasks);
        lock.unlock();
        for (auto& t : left) t.on_done(std::make_exception_ptr(Error(Errc::refused, "the batcher has stopped")));
        break;
      }
      try {
        run_generation(generation, batch);
      } catch (...) {
        // A device error: nothing more can run. Requests of this generation
        // not yet on the device fail here; those on it fail in the collector.
        const auto error = std::current_exception();
        fail_everything(error);
        for (const auto& r : generation) complete(r, BatchRequest::State::failed, error);
        break;
      }
    }
    done_q.close();
  }

  std::atomic<int> in_flight_batches{0};

  void run_generation(const std::vector<std::shared_ptr<BatchRequest>>& generation, PackedBatch& batch) {
    const RowProduct product = generation.front()->options_.product;
    const TextOutputSettings& extras = generation.front()->options_.extras;
    std::vector<Member> members;
    std::vector<int64_t> lengths;
    for (const auto& r : generation) {
      for (size_t i = 0; i < r->encodings_.size(); ++i) {
        members.push_back({r, static_cast<uint32_t>(i)});
        lengths.push_back(static_cast<int64_t>(r->encodings_[i].ids.size()));
      }
    }
    for (const auto& cut : cut_batches(lengths, batch_tokens, opt.max_batch_size)) {
      BatchJob job;
      job.product = product;
      job.extras = extras;
      Clock::time_point oldest_ready = Clock::time_point::max();
      std::vector<std::shared_ptr<BatchRequest>> dropped;  // requests with texts dropped here
      for (uint32_t m : cut) {
        Member& member = members[m];
        BatchRequest& r = *member.request;
        std::lock_guard lock(r.mu_);
        --r.unbatched_;
        if (r.cancelled_ || r.state_ != BatchRequest::State::queued) {
          if (dropped.empty() || dropped.back() != member.request) dropped.push_back(member.request);
          continue;
        }
        ++r.in_flight_;
        oldest_ready = std::min(oldest_ready, r.tokenized_);
        if (!r.started_) {
          r.started_ = true;
          r.started_at_ = Clock::now();
          r.queue_seconds = seconds_between(r.tokenized_, r.started_at_);
        }
        job.members.push_back(member);
      }
      // A cancelled request whose last texts were just dropped is finished now.
      for (const auto& r : dropped) maybe_finish(r);
      if (job.members.empty()) continue;
      if (opt.trace) {
        // The executor's lane stays a sequence: a wait starts no earlier than the last cut.
        const Clock::time_point now = Clock::now();
        const Clock::time_point from = std::max(oldest_ready, last_cut_);
        if (from < now) opt.trace->record("queue wait", "stage", from, now, static_cast<int64_t>(job.members.size()));
        last_cut_ = now;
      }
      enqueue(job, batch);
      if (opt.trace) last_cut_ = Clock::now();
    }
  }

  Clock::time_point last_cut_{};  // executor thread only: when its last traced span ended
  std::vector<int32_t> key_lens;  // executor thread only: the batch being enqueued's attention key counts

  void enqueue(BatchJob& job, PackedBatch& batch) {
    {
      TraceSpan span(opt.trace, "copy");  // the ids into the packed batch (while earlier batches run)
      span.set_arg(static_cast<int64_t>(job.members.size()));
      batch.clear();
      for (const Member& m : job.members) {
        const Encoding& e = m.request->encodings_[m.index];
        batch.add(e.ids, e.type_ids, enc.config);
      }
      job.tokens = batch.tokens();
    }
    std::optional<size_t> slot;
    {
      TraceSpan span(opt.trace, "wait slot", "sync");
      slot = free_slots.pop();
    }
    if (!slot) throw Error(Errc::internal, "request batcher: output slots closed");
    job.slot = *slot;
    Slot& s = slots[job.slot];
    EncoderOutputs out;
    if (job.product == RowProduct::pooled) {
      if (sources.dense) {
        out.pooled = static_cast<float*>(s.rows->data());
        out.pooling = opt.pooling;
        out.normalize = opt.normalize;
      }
      if (job.extras.sparse || job.extras.colbert) {
        const size_t sparse_floats = sparse_host_floats(enc, job.extras, runner->max_tokens(), runner->max_sequences());
        const size_t colbert_floats = colbert_host_floats(enc, job.extras, runner->max_tokens());
        if (sparse_floats > s.sparse_floats) {
          s.sparse = backend.allocate_host(sparse_floats * sizeof(float));
          s.sparse_floats = sparse_floats;
        }
        if (colbert_floats > s.colbert_floats) {
          s.colbert = backend.allocate_host(colbert_floats * sizeof(float));
          s.colbert_floats = colbert_floats;
        }
        set_text_output_destinations(enc, job.extras, out, host_floats(s.sparse), host_floats(s.colbert));
        text_key_lens(job.extras, batch.ids, batch.cu_seqlens, key_lens);  // ColBERT queries: expansion tokens no keys
        out.key_lens = key_lens;
      }
    } else if (job.product == RowProduct::logits) {
      out.logits = static_cast<float*>(s.rows->data());
    } else {
      if (!s.hidden)
        s.hidden = backend.allocate_host(static_cast<size_t>(batch_tokens_capacity() * enc.config.hidden_size) *
                                         sizeof(float));
      out.hidden = static_cast<float*>(s.hidden->data());
    }
    in_flight_batches.fetch_add(1);
    try {
      TraceSpan span(opt.trace, "copy");  // to the device, and the batch's work enqueued
      span.set_arg(job.tokens);
      job.done = runner->run(batch, out);
    } catch (...) {
      in_flight_batches.fetch_sub(1);
      free_slots.push(job.slot);
      throw;
    }
    batches.fetch_add(1);
    if (!done_q.push(std::move(job))) throw Error(Errc::internal, "request batcher: collector stopped");
  }

  int64_t batch_tokens_capacity() const { return runner->max_tokens(); }

  // ------------------------------------------------------------ collector

  void collector_loop() {
    thread_started("batcher-collector");
    while (auto job = done_q.pop()) {
      std::exception_ptr error;
      try {
        TraceSpan span(opt.trace, "compute", "sync");
        span.set_arg(static_cast<int64_t>(job->members.size()));
        backend.wait(*job->done);  // the one host sync per batch
      } catch (...) {
        error = std::current_exception();
      }
      if (error) {
        fail_everything(error);
        for (const Member& m : job->members) {
          {
            std::lock_guard lock(m.request->mu_);
            --m.request->in_flight_;
          }
          complete(m.request, BatchRequest::State::failed, error);
        }
      } else {
        TraceSpan span(opt.trace, "scatter");
        span.set_arg(static_cast<int64_t>(job->members.size()));
        scatter(*job);
      }
      {
        std::lock_guard lock(mu);
        in_flight_batches.fetch_sub(1);
      }
      free_slots.push(job->slot);
      pending_cv.notify_one();  // the executor may be waiting to see the device idle
      idle_cv.notify_all();     // stop() waits for no batch on the device
      std::function<void(int64_t, int64_t)> obs;
      {
        std::lock_guard lock(mu);
        obs = observer;
      }
      if (obs && !error) obs(static_cast<int64_t>(job->members.size()), job->tokens);
    }
  }

  void scatter(const BatchJob& job) {
    const Slot& s = slots[job.slot];
    const int64_t width = row_width(job.product);
    const size_t row_bytes = static_cast<size_t>(width) * sizeof(float);
    // Counted before any request finishes, so a caller that sees its request
    // done sees its texts in stats().
    texts.fetch_add(job.members.size());
    tokens.fetch_add(static_cast<uint64_t>(job.tokens));
    int64_t token_row = 0;
    for (size_t b = 0; b < job.members.size(); ++b) {
      const Member& m = job.members[b];
      BatchRequest& r = *m.request;
      const int64_t len = static_cast<int64_t>(r.encodings_[m.index].ids.size());
      {
        std::lock_guard lock(r.mu_);
        // A request failed meanwhile (another batch's error) has no use for
        // its rows; it may even have been finished and answered.
        if (r.state_ == BatchRequest::State::queued) {
          if (job.product == RowProduct::tokens) {
            const auto* src = static_cast<const float*>(s.hidden->data()) + token_row * width;
            std::memcpy(r.values.data() + r.row_offsets[m.index] * width, src, static_cast<size_t>(len) * row_bytes);
          } else if (width > 0) {
            const auto* src = static_cast<const float*>(s.rows->data()) + static_cast<int64_t>(b) * width;
            std::memcpy(r.values.data() + static_cast<size_t>(m.index) * static_cast<size_t>(width), src, row_bytes);
          }
          if (!r.extras.empty())
            r.extras[m.index] = text_extras(enc, job.extras, r.encodings_[m.index].ids, token_row,
                                            static_cast<int64_t>(b), host_floats(s.sparse), host_floats(s.colbert));
        }
        --r.in_flight_;
        ++r.collected_;
      }
      queued_texts.fetch_sub(1);
      token_row += len;
      maybe_finish(m.request);
    }
  }

  // A device error: this batcher can run nothing more. Every queued request
  // fails with it, and so does every later one.
  void fail_everything(std::exception_ptr error) {
    std::deque<std::shared_ptr<BatchRequest>> dropped;
    {
      std::lock_guard lock(mu);
      if (!broken) broken = error;
      dropped.swap(pending);
    }
    for (auto& r : dropped) complete(r, BatchRequest::State::failed, error);
  }
};

void request_finished(RequestBatcherState& owner, size_t uncollected_texts, bool cancelled) {
  owner.queued_texts.fetch_sub(uncollected_texts);
  if (cancelled) owner.cancelled_texts.fetch_add(uncollected_texts);
  {
    std::lock_guard lock(owner.mu);
    --owner.open_requests;
  }
  owner.idle_cv.notify_all();
}

// ---------------------------------------------------------------- RequestBatcher

RequestBatcher::RequestBatcher(const LoadedEncoder& encoder, Backend& backend, const Tokenizer& tokenizer,
                               const RequestBatcherOptions& options)
    : state_(std::make_unique<RequestBatcherState>(encoder, backend, tokenizer, options)) {
  auto& s = *state_;
  if (options.batch_tokens <= 0) throw Error(Errc::invalid_argument, "--batch-tokens: expected a positive number");
  if (options.max_batch_size <= 0)
    throw Error(Errc::invalid_argument, "--max-batch-size: expected a positive number");
  if (options.workers <= 0) throw Error(Errc::invalid_argument, "--workers: expected a positive number");
  if (options.generation_texts == 0) throw Error(Errc::invalid_argument, "generation_texts: expected a positive number");
  if (options.max_wait_seconds < 0) throw Error(Errc::invalid_argument, "--max-wait-ms: expected 0 or more");
  const int64_t width = std::max<int64_t>(encoder.sentence_width(), encoder.has_classifier() ? encoder.config.num_labels() : 0);
  for (auto& slot : s.slots)
    slot.rows = backend.allocate_host(static_cast<size_t>(options.max_batch_size * width) * sizeof(float));
  // The device workspace for the token budget; out of memory halves it
  // (RELIABILITY 10), as in the embed pipeline. A batch holds at least one
  // whole sequence, however long.
  const auto longest = static_cast<int64_t>(options.encode.max_length);
  s.batch_tokens = options.batch_tokens;
  for (;;) {
    try {
      s.runner = std::make_unique<EncoderRunner>(encoder, backend, std::max(s.batch_tokens, longest),
                                                 options.max_batch_size, kSlots);
      break;
    } catch (const OutOfMemoryError& e) {
      if (s.batch_tokens <= longest)
        throw Error(Errc::device, std::string(e.what()) + "; even a batch of one " + std::to_string(longest) +
                                      "-token sequence does not fit: lower --max-length, or free the device");
      s.batch_tokens = std::max(s.batch_tokens / 2, longest);
    }
  }
  for (size_t i = 0; i < kSlots; ++i) s.free_slots.push(i);
  s.syncs0 = backend.host_syncs();
  s.busy0 = backend.busy_seconds();
  try {
    for (int w = 0; w < options.workers; ++w) s.threads.emplace_back([&s, w] { s.tokenizer_loop(static_cast<size_t>(w)); });
    s.threads.emplace_back([&s] { s.executor_loop(); });
    s.threads.emplace_back([&s] { s.collector_loop(); });
  } catch (...) {
    {
      std::lock_guard lock(s.mu);
      s.quitting = true;
    }
    s.work_cv.notify_all();
    s.pending_cv.notify_all();
    for (auto& t : s.threads) t.join();
    throw;
  }
}

RequestBatcher::~RequestBatcher() {
  stop(true);
  auto& s = *state_;
  {
    std::lock_guard lock(s.mu);
    s.quitting = true;
  }
  s.work_cv.notify_all();
  s.pending_cv.notify_all();
  for (auto& t : s.threads) t.join();
  // Work already enqueued may still write into the slots.
  s.backend.drain();
}

std::shared_ptr<BatchRequest> RequestBatcher::submit(std::vector<BatchItem> items, const BatchRequestOptions& options,
                                                     std::function<void(BatchRequest&)> on_done) {
  auto& s = *state_;
  std::shared_ptr<BatchRequest> r(new BatchRequest);
  r->on_done_ = std::move(on_done);
  r->submitted_ = Clock::now();
  r->options_ = options;
  const size_t n = items.size();
  r->items_ = std::move(items);
  r->encodings_.resize(n);
  r->unbatched_ = n;
  r->width = s.row_width(options.product);
  if (wants_extras(options)) {
    try {
      if (options.product != RowProduct::pooled)
        throw Error(Errc::invalid_argument, "sparse / ColBERT outputs go with pooled rows");
      const TextOutputSources src = text_output_sources(s.enc, s.tok.vocab_size());
      if (options.extras.sparse && src.sparse == SparseSource::none)
        throw Error(Errc::unsupported, "this model gives no sparse output");
      if (options.extras.colbert && src.multi_vector == MultiVectorSource::none)
        throw Error(Errc::unsupported, "this model gives no ColBERT vectors");
    } catch (...) {
      r->finish(BatchRequest::State::failed, std::current_exception());
      return r;
    }
  }
  if (options.product == RowProduct::logits && !s.enc.has_classifier()) {
    r->finish(BatchRequest::State::failed,
              std::make_exception_ptr(Error(Errc::unsupported, "this model has no classification head")));
    return r;
  }
  std::exception_ptr refusal;
  {
    std::lock_guard lock(s.mu);
    if (s.broken)
      refusal = s.broken;
    else if (s.stopping)
      refusal = std::make_exception_ptr(Error(Errc::refused, "the server is stopping: no new requests are taken"));
  }
  if (refusal) {
    r->finish(BatchRequest::State::failed, refusal);
    return r;
  }
  s.requests.fetch_add(1);
  r->texts_ = n;
  s.queued_texts.fetch_add(n);
  {
    std::lock_guard lock(s.mu);
    ++s.open_requests;
  }
  r->owner_ = &s;
  if (n == 0) {
    if (options.product == RowProduct::tokens) r->row_offsets = {0};
    r->finish(BatchRequest::State::done);
    return r;
  }
  const size_t workers = static_cast<size_t>(s.opt.workers);
  const size_t per_chunk = std::max(kMinChunkTexts, (n + workers - 1) / workers);
  const size_t chunks = (n + per_chunk - 1) / per_chunk;
  r->chunks_left_ = chunks;
  {
    std::lock_guard lock(s.mu);
    for (size_t c = 0; c < chunks; ++c) s.chunks.push_back({r, c * per_chunk, std::min(n, (c + 1) * per_chunk)});
  }
  if (chunks == 1)
    s.work_cv.notify_one();
  else
    s.work_cv.notify_all();
  return r;
}

void RequestBatcher::stop(bool drain) {
  auto& s = *state_;
  std::deque<std::shared_ptr<BatchRequest>> dropped;
  {
    std::lock_guard lock(s.mu);
    s.stopping = true;
    if (!drain) {
      dropped = s.pending;
      for (auto& c : s.chunks) dropped.push_back(c.request);
    }
  }
  for (auto& r : dropped) r->cancel();
  s.pending_cv.notify_all();
  // Wait until no request is open and no batch is on the device.
  std::unique_lock lock(s.mu);
  s.idle_cv.wait(lock, [&] { return s.open_requests == 0 && s.in_flight_batches.load() == 0; });
}

void RequestBatcher::run_on_device(std::function<void(Backend&)> fn, std::function<void(std::exception_ptr)> on_done) {
  auto& s = *state_;
  std::exception_ptr refusal;
  {
    std::lock_guard lock(s.mu);
    if (s.broken)
      refusal = s.broken;
    else if (s.quitting)
      refusal = std::make_exception_ptr(Error(Errc::refused, "the batcher has stopped"));
    else
      s.device_tasks.push_back({std::move(fn), std::move(on_done)});
  }
  if (refusal) return on_done(refusal);
  s.pending_cv.notify_one();
}

RequestBatcherStats RequestBatcher::stats() const {
  const auto& s = *state_;
  RequestBatcherStats st;
  st.requests = s.requests.load();
  st.texts = s.texts.load();
  st.tokens = s.tokens.load();
  st.batches = s.batches.load();
  st.cancelled_texts = s.cancelled_texts.load();
  st.queued_texts = s.queued_texts.load();
  st.host_syncs = s.backend.host_syncs() - s.syncs0;
  const double busy = s.backend.busy_seconds();
  st.device_busy_seconds = s.busy0 >= 0 && busy >= 0 ? busy - s.busy0 : -1;
  st.seconds = seconds_between(s.started, Clock::now());
  st.batch_tokens = s.batch_tokens;
  return st;
}

void RequestBatcher::set_batch_observer(std::function<void(int64_t, int64_t)> observer) {
  std::lock_guard lock(state_->mu);
  state_->observer = std::move(observer);
}

int64_t RequestBatcher::max_length() const { return static_cast<int64_t>(state_->opt.encode.max_length); }
int64_t RequestBatcher::pooled_width() const { return state_->enc.sentence_width(); }
int64_t RequestBatcher::hidden_size() const { return state_->enc.config.hidden_size; }
int64_t RequestBatcher::num_labels() const {
  return state_->enc.has_classifier() ? state_->enc.config.num_labels() : 0;
}

}  // namespace stoke
