// What each job prints when it ends: its summary (unless --quiet), and the
// warnings said even with --quiet. On stderr, so stdout stays the job's output.
#pragma once

#include "jobs/classify_job.h"
#include "jobs/embed_job.h"
#include "jobs/tokenize_job.h"
#include "jobs/train_job.h"
#include "jobs/verify_job.h"

namespace stoke::cli {

void report_tokenize(const TokenizeSummary& s, const TokenizeOptions& o);
void report_embed(const EmbedSummary& s, const EmbedOptions& o);
void report_classify(const ClassifySummary& s, const ClassifyOptions& o);
void report_train(const TrainSummary& s, const TrainOptions& o);
// The command line as typed (main sets it), for "go on with: ..." lines.
void set_command_line(int argc, char** argv);
// The problems on stderr, the verdict on stdout; the exit status (1: a problem found).
int report_verify(const VerifyReport& r);

}  // namespace stoke::cli
