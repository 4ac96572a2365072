#include "apps/stoke/serve_command.h"

#include "apps/stoke/job_flags.h"
#include "apps/stoke/number_flags.h"
#include "serve/serve_job.h"

namespace stoke::cli {

namespace {

class ServeCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("serve", "An HTTP embedding, classification and reranking server (TEI and OpenAI APIs) "
                                       "that batches across requests");
    add_common_flags(cmd_, o_.common, kDevice | kBatchTokens | kWorkers);
    cmd_->add_option("--host", o_.host, "Address to listen on (0.0.0.0: every interface)");
    add_int(cmd_, "--port", o_.port, {0, 65535}, "TCP port (0: a free one; the log line says which)");
    add_int(cmd_, "--max-concurrent-requests", o_.max_concurrent_requests, {1, 1 << 20},
            "Requests in flight at once; more get 429");
    add_int(cmd_, "--max-client-batch-size", o_.max_client_batch_size, {1, 1 << 20},
            "Texts per request at most (422 past it)");
    add_int(cmd_, "--payload-limit", o_.payload_limit, {1, int64_t{1} << 32},
            "Request body bytes at most (413 past it, checked while reading)");
    add_int(cmd_, "--max-batch-size", o_.max_batch_size, {1, 1 << 20}, "Sequences per batch at most");
    cmd_->add_flag("--auto-truncate", o_.auto_truncate,
                   "Cut texts longer than the max length instead of answering 422 (the default of `truncate`)");
    cmd_->add_option("--api-key", o_.api_key, "Require Authorization: Bearer KEY on every route but /health");
    cmd_->add_option("--api-key-file", o_.api_key_file, "As --api-key, the key read from the file's first line");
    cmd_->add_option("--served-model-name", o_.served_model_name,
                     "The model's name in answers and /v1/models (default: the folder's name or the hub id)");
    cmd_->add_option("--model-kind", o_.model_kind,
                     "auto, embedding, classifier or reranker (auto: sentence-transformers files embed; a "
                     "sequence classifier classifies, with one label it reranks; else embed)");
    add_real(cmd_, "--max-wait-ms", o_.max_wait_ms, {0, 60000},
             "How long the batcher may wait to fill a batch when the device is idle (0: run at once)");
    add_real(cmd_, "--header-timeout", o_.header_timeout_s, {0, 86400, true},
             "Seconds from a request's first byte to its last header byte");
    add_real(cmd_, "--body-timeout", o_.body_timeout_s, {0, 86400, true},
             "Seconds to read a request body (and to write an answer)");
    add_real(cmd_, "--idle-timeout", o_.idle_timeout_s, {0, 86400, true},
             "Seconds a keep-alive connection may wait for its next request");
    add_real(cmd_, "--drain-timeout", o_.drain_timeout_s, {0, 86400, true},
             "On SIGTERM/SIGINT: seconds to finish the requests in flight before cancelling them");
    add_int(cmd_, "--io-threads", o_.io_threads, {1, 64}, "Threads reading requests and writing answers");
    cmd_->add_flag("--log-requests", o_.log_requests, "Debugging: one line per request on stderr");
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override { return {{cmd_, &o_.common, false}}; }
  int run() override { return run_serve(o_); }

 private:
  CLI::App* cmd_ = nullptr;
  ServeOptions o_;
};

}  // namespace

std::unique_ptr<Command> make_serve_command() { return std::make_unique<ServeCommand>(); }

}  // namespace stoke::cli
