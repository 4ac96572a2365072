// `stoke serve`'s settings, declared once in its option table
// (serve_option_table.cc), read by the CLI (apps/stoke) and handed to run_serve.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "jobs/common_options.h"
#include "jobs/option_table.h"

namespace stoke {

namespace serve {

// What the server does with its model: embed, classify, or (a one-label
// cross-encoder) rerank. --model-kind names one, or leaves it to the folder.
enum class ModelKind { embedding, classifier, reranker };
const char* model_kind_name(ModelKind k);  // "embedding", ...: the --model-kind words and the start line

}  // namespace serve

struct ServeOptions {
  CommonOptions common;                    // --model, --device, --precision, --max-length, --workers, --batch-tokens, --trace
  std::string host = "127.0.0.1";          // --host: loopback unless told otherwise
  int64_t port = 8080;                     // --port (0: any free port; the log line says which)
  int64_t max_concurrent_requests = 512;   // --max-concurrent-requests (429 past it)
  int64_t max_client_batch_size = 32;      // --max-client-batch-size: texts per request
  int64_t payload_limit = 2'000'000;       // --payload-limit: request body bytes
  int64_t max_batch_size = 256;            // --max-batch-size: sequences per batch
  bool auto_truncate = false;              // --auto-truncate: the default of `truncate`
  std::string api_key;                     // --api-key
  std::string api_key_file;                // --api-key-file (first line)
  std::string served_model_name;           // --served-model-name (default: the folder's name)
  std::optional<serve::ModelKind> model_kind;  // --model-kind embedding|classifier|reranker (unset: auto)
  double max_wait_ms = 0;                  // --max-wait-ms
  double header_timeout_s = 30;            // --header-timeout
  double body_timeout_s = 30;              // --body-timeout
  double idle_timeout_s = 60;              // --idle-timeout (keep-alive)
  double drain_timeout_s = 30;             // --drain-timeout: SIGTERM to exit at most
  int64_t io_threads = 2;                  // --io-threads: HTTP parsing and answers
  bool log_requests = false;               // --log-requests: one line per request on stderr (debug)
};

// serve's options, declared once (jobs/option_table.h): the common options
// serve takes (kServeFlags), then its own. Each number is range-checked as
// it is set, so run_serve sees only values the table accepts.
const OptionTable<ServeOptions>& serve_option_table();

}  // namespace stoke
