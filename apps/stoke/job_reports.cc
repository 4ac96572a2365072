#include "apps/stoke/job_reports.h"

#include <cstdio>
#include <string>
#include <vector>

#include "text/tokenizer.h"

namespace stoke::cli {

namespace {

std::string count_of(uint64_t n, const char* one, const char* many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

// An input without a single record is almost always a mistake (a wrong file,
// an empty pipe): said even with --quiet, though the run itself succeeds.
void warn_if_empty(uint64_t records, const std::string& input) {
  if (records == 0)
    std::fprintf(stderr, "stoke: warning: %s holds no records: nothing was done\n",
                 input == "-" ? "stdin" : input.c_str());
}

std::string per_second(double n, double secs) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.0f", secs > 0 ? n / secs : 0.0);
  return buf;
}

}  // namespace

void report_tokenize(const TokenizeSummary& s, const TokenizeOptions& tok) {
  warn_if_empty(s.records + s.skipped, tok.common.input);
  if (s.skipped > 0)
    std::fprintf(stderr, "stoke: skipped %s (no output line each): see %s\n",
                 count_of(s.skipped, "bad record", "bad records").c_str(), s.errors_file.c_str());
  if (!tok.common.quiet) {
    std::fprintf(stderr,
                 "tokenized %llu records (%llu pairs), %llu tokens in %.2f s: %s records/s, %s tokens/s; "
                 "truncated %llu at max length %lld (from %s); invalid UTF-8 replaced %llu\n",
                 static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.pairs),
                 static_cast<unsigned long long>(s.tokens), s.seconds,
                 per_second(static_cast<double>(s.records), s.seconds).c_str(),
                 per_second(static_cast<double>(s.tokens), s.seconds).c_str(),
                 static_cast<unsigned long long>(tok.no_truncation ? 0 : s.truncated),
                 static_cast<long long>(s.max_length), s.max_length_from.c_str(),
                 static_cast<unsigned long long>(s.replaced_utf8));
  }
  if (s.capped > 0)  // said even with --quiet: these rows hold fewer ids than their texts
    std::fprintf(stderr,
                 "stoke: warning: texts over %zu MiB were tokenized from their first %zu MiB only (%llu of "
                 "them): even with --no-truncation a text's bytes are capped, so memory stays bounded\n",
                 kUntruncatedTextBytes >> 20, kUntruncatedTextBytes >> 20,
                 static_cast<unsigned long long>(s.capped));
}

// GEMMs on the backend's plain kernel: said even with --quiet, as a warning
// (a slow path the run took, jobs/gemm_fallback_report.h).
static void warn_gemm_fallbacks(const std::vector<std::string>& lines) {
  for (const std::string& l : lines) std::fprintf(stderr, "stoke: warning: slow GEMM on the plain kernel: %s\n", l.c_str());
}

void report_embed(const EmbedSummary& s, const EmbedOptions& o) {
  for (const auto& note : s.notes) std::fprintf(stderr, "stoke: %s\n", note.c_str());
  warn_gemm_fallbacks(s.gemm_fallbacks);
  if (s.cancelled) return;  // a stop: its note says what is kept and how to go on
  if (!s.already_complete) warn_if_empty(s.records, o.common.input);
  if (s.already_complete) {
    std::fprintf(stderr, "stoke: %s is already complete (%llu rows in %llu shards); nothing to do\n",
                 o.output.c_str(), static_cast<unsigned long long>(s.texts),
                 static_cast<unsigned long long>(s.shards));
  } else if (!o.common.quiet) {
    // A chunked run's rows are chunks (or, pooled, its records).
    if (o.chunks.on())
      std::fprintf(stderr, "chunked %llu records into %llu rows (%s, --chunk-tokens %lld, overlap %lld, boundary %s)\n",
                   static_cast<unsigned long long>(s.chunked_records), static_cast<unsigned long long>(s.texts),
                   o.chunks.pool != ChunkPooling::none ? (std::string("pooled ") + chunk_pooling_name(o.chunks.pool)).c_str()
                   : o.chunks.late                      ? "late chunking"
                                                        : "a row per chunk",
                   static_cast<long long>(o.chunks.settings.tokens), static_cast<long long>(o.chunks.settings.overlap),
                   chunk_boundary_name(o.chunks.settings.boundary));
    std::fprintf(stderr,
                 "embedded %llu texts (%llu tokens, %llu batches) in %.2f s on %s: %s texts/s, %s tokens/s "
                 "(over the job's wall time; the pipeline's in manifest.json run); "
                 "%lld dims, pooling %s%s, %s; truncated %llu at max length %lld; invalid UTF-8 replaced %llu; "
                 "host syncs %llu -> %s\n",
                 static_cast<unsigned long long>(s.texts), static_cast<unsigned long long>(s.tokens),
                 static_cast<unsigned long long>(s.batches), s.seconds, s.device.c_str(),
                 per_second(static_cast<double>(s.texts), s.seconds).c_str(),
                 per_second(static_cast<double>(s.tokens), s.seconds).c_str(), static_cast<long long>(s.dims),
                 s.pooling.c_str(), s.normalize ? " + normalize" : "", s.precision.c_str(),
                 static_cast<unsigned long long>(s.truncated), static_cast<long long>(s.max_length),
                 static_cast<unsigned long long>(s.replaced_utf8), static_cast<unsigned long long>(s.host_syncs),
                 o.output.c_str());
    std::fprintf(stderr,
                 "  records %llu (skipped %llu bad, %llu other tasks', %llu done by an earlier run); %llu shards; "
                 "padding efficiency %.2f; bounded by %s\n%s",
                 static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.skipped),
                 static_cast<unsigned long long>(s.other_tasks), static_cast<unsigned long long>(s.resumed),
                 static_cast<unsigned long long>(s.shards), s.padding_efficiency, s.bound_by.c_str(),
                 s.stage_report.c_str());
    if (s.quality) std::fprintf(stderr, "  %s\n", embed_quality_line(*s.quality).c_str());
    if (!s.gpu_report.empty()) std::fprintf(stderr, "  %s\n", s.gpu_report.c_str());
  }
}

void report_classify(const ClassifySummary& s, const ClassifyOptions& cls) {
  for (const auto& note : s.notes) std::fprintf(stderr, "stoke: %s\n", note.c_str());
  warn_if_empty(s.read, cls.common.input);
  if (s.skipped > 0)
    std::fprintf(stderr, "stoke: skipped %s (no output line each): see %s\n",
                 count_of(s.skipped, "bad record", "bad records").c_str(), s.errors_file.c_str());
  if (!cls.common.quiet) {
    std::fprintf(stderr,
                 "classified %llu records (%llu pairs, %llu tokens, %llu batches) in %.2f s on %s: %s records/s; "
                 "%s; truncated %llu; host syncs %llu\n",
                 static_cast<unsigned long long>(s.records), static_cast<unsigned long long>(s.pairs),
                 static_cast<unsigned long long>(s.tokens), static_cast<unsigned long long>(s.batches), s.seconds,
                 s.device.c_str(), per_second(static_cast<double>(s.records), s.seconds).c_str(), s.mode.c_str(),
                 static_cast<unsigned long long>(s.truncated), static_cast<unsigned long long>(s.host_syncs));
    if (s.quality) std::fprintf(stderr, "  %s\n", classify_quality_line(*s.quality).c_str());
    if (!s.gpu_report.empty()) std::fprintf(stderr, "  %s\n", s.gpu_report.c_str());
  }
}

namespace {
std::string g_command_line;

// The command as typed, with --resume (and without --overwrite): how a
// stopped train run goes on.
std::string resume_command_line() {
  std::string line = g_command_line;
  if (line.find(" --resume") == std::string::npos) line += " --resume";
  for (size_t at; (at = line.find(" --overwrite")) != std::string::npos;) line.erase(at, 12);
  return line;
}
}  // namespace

void set_command_line(int argc, char** argv) {
  g_command_line = "stoke";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool plain = !a.empty() && a.find_first_of(" \t'\"$`\\*?;&|<>()") == std::string::npos;
    if (plain) {
      g_command_line += " " + a;
    } else {
      std::string q = "'";
      for (char c : a) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      g_command_line += " " + q + "'";
    }
  }
}

void report_train(const TrainSummary& s, const TrainOptions& o) {
  if (s.rank != 0) return;  // data-parallel runs: rank 0 reports for all
  if (s.stopped) {
    std::fprintf(stderr,
                 "stoke: stopped at step %lld of %lld: checkpoint-%lld is saved in %s (no final model yet); go on "
                 "with: %s\n",
                 static_cast<long long>(s.steps), static_cast<long long>(s.total_steps),
                 static_cast<long long>(s.steps), o.output.c_str(), resume_command_line().c_str());
    return;
  }
  for (const auto& note : s.notes) std::fprintf(stderr, "stoke: %s\n", note.c_str());
  warn_gemm_fallbacks(s.gemm_fallbacks);
  if (!o.common.quiet) {
    std::fprintf(stderr,
                 "trained %lld steps (%.2f epochs, batch %lld x %lld, lr %g) on %s, %s: %llu samples in %.2f s: "
                 "%.1f samples/s, %.0f tokens/s; host syncs %llu (bound %llu)\n  last loss %.4f",
                 static_cast<long long>(s.steps), s.epochs, static_cast<long long>(s.batch_size),
                 static_cast<long long>(s.grad_accum), s.lr, s.device.c_str(), s.precision.c_str(),
                 static_cast<unsigned long long>(s.samples), s.seconds, s.samples_per_s, s.tokens_per_s,
                 static_cast<unsigned long long>(s.host_syncs), static_cast<unsigned long long>(s.host_sync_bound),
                 s.last_loss);
    if (s.has_eval && !s.eval_named.empty()) {
      // The evaluator's headline numbers (run.json and log.jsonl have them all).
      for (const char* name : {"cosine_ndcg@10", "cosine_mrr@10", "cosine_recall@10", "spearman_cosine",
                               "pearson_cosine"})
        for (const auto& [n, v] : s.eval_named)
          if (n == name) std::fprintf(stderr, "; eval %s %.4f", name, v);
    } else if (s.has_eval) {
      std::fprintf(stderr, "; eval loss %.4f, accuracy %.4f, macro-F1 %.4f", s.eval_loss, s.eval_accuracy,
                   s.eval_macro_f1);
    }
    if (s.loss_scaling)
      std::fprintf(stderr, "; loss scale %g, %lld %s skipped (inf/NaN gradients)", s.loss_scale,
                   static_cast<long long>(s.skipped_steps), s.skipped_steps == 1 ? "step" : "steps");
    std::fprintf(stderr, "%s%s -> %s\n", s.resumed_from.empty() ? "" : "; resumed from ",
                 s.resumed_from.c_str(), s.output.c_str());
    if (!s.gpu_report.empty()) std::fprintf(stderr, "  %s\n", s.gpu_report.c_str());
    if (s.ranks > 1)
      std::fprintf(stderr, "  %d ranks, global batch %lld; all-reduce %.2f s, %.2f s of it not overlapped with the backward\n",
                   s.ranks, static_cast<long long>(s.global_batch), s.comm_seconds, s.comm_exposed_seconds);
  }
}

int report_verify(const VerifyReport& r) {
  for (const auto& n : r.notes) std::fprintf(stderr, "stoke: note: %s\n", n.c_str());
  for (const auto& p : r.problems) std::fprintf(stderr, "stoke: verify: %s\n", p.c_str());
  if (!r.problems.empty()) {
    std::fprintf(stderr, "stoke: verify found %s in %s\n", count_of(r.problems.size(), "problem", "problems").c_str(),
                 count_of(r.folders, "folder", "folders").c_str());
    return 1;
  }
  std::printf("verified %s (%s): %s, %s, %llu skipped — complete, consistent, intact\n",
              count_of(r.folders, "folder", "folders").c_str(), count_of(r.tasks, "task", "tasks").c_str(),
              count_of(r.records, "record", "records").c_str(), count_of(r.rows, "row", "rows").c_str(),
              static_cast<unsigned long long>(r.skipped));
  return 0;
}

}  // namespace stoke::cli
