// `stoke serve`'s settings, parsed by the CLI (apps/stoke) and handed to run_serve.
#pragma once

#include <cstdint>
#include <string>

#include "jobs/common_options.h"

namespace stoke {

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
  std::string model_kind = "auto";         // --model-kind auto|embedding|classifier|reranker
  double max_wait_ms = 0;                  // --max-wait-ms
  double header_timeout_s = 30;            // --header-timeout
  double body_timeout_s = 30;              // --body-timeout
  double idle_timeout_s = 60;              // --idle-timeout (keep-alive)
  double drain_timeout_s = 30;             // --drain-timeout: SIGTERM to exit at most
  int64_t io_threads = 2;                  // --io-threads: HTTP parsing and answers
  bool log_requests = false;               // --log-requests: one line per request on stderr (debug)
};

}  // namespace stoke
