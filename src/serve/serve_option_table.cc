// `stoke serve`'s options (serve/serve_options.h serve_option_table): the
// common options serve takes, then the server's own. The CLI lists and reads
// them from here (so `--config FILE` takes them too).
#include "serve/serve_options.h"

namespace stoke {

namespace {

using O = ServeOptions;
using serve::ModelKind;

OptionTable<O> make_table() {
  OptionTable<O> t;
  for (const Option<CommonOptions>& c : common_option_table())
    if (job_takes(c, kServeFlags)) t.push_back(lift_option<O>(c, [](O& o) -> CommonOptions& { return o.common; }));
  auto add = [&t](Option<O> o) { t.push_back(std::move(o)); };
  add(text_option<O>("--host", [](O& o) -> std::string& { return o.host; },
                     "Address to listen on (0.0.0.0: every interface)", kOfferCli));
  add(int_option<O>("--port", [](O& o) -> int64_t& { return o.port; }, 0, 65535,
                    "TCP port (0: a free one; the log line says which)", kOfferCli));
  add(int_option<O>("--max-concurrent-requests", [](O& o) -> int64_t& { return o.max_concurrent_requests; }, 1,
                    1 << 20, "Requests in flight at once; more get 429", kOfferCli));
  add(int_option<O>("--max-client-batch-size", [](O& o) -> int64_t& { return o.max_client_batch_size; }, 1, 1 << 20,
                    "Texts per request at most (422 past it)", kOfferCli));
  add(int_option<O>("--payload-limit", [](O& o) -> int64_t& { return o.payload_limit; }, 1, int64_t{1} << 32,
                    "Request body bytes at most (413 past it, checked while reading)", kOfferCli));
  add(int_option<O>("--max-batch-size", [](O& o) -> int64_t& { return o.max_batch_size; }, 1, 1 << 20,
                    "Sequences per batch at most", kOfferCli));
  add(flag_option<O>("--auto-truncate", [](O& o) -> bool& { return o.auto_truncate; },
                     "Cut texts longer than the max length instead of answering 422 (the default of `truncate`)",
                     kOfferCli));
  add(text_option<O>("--api-key", [](O& o) -> std::string& { return o.api_key; },
                     "Require Authorization: Bearer KEY on every route but /health", kOfferCli, false));
  add(text_option<O>("--api-key-file", [](O& o) -> std::string& { return o.api_key_file; },
                     "As --api-key, the key read from the file's first line", kOfferCli));
  add(text_option<O>("--served-model-name", [](O& o) -> std::string& { return o.served_model_name; },
                     "The model's name in answers and /v1/models (default: the folder's name or the hub id)",
                     kOfferCli));
  // auto is unset: ServedModel decides from the folder.
  add(enum_option<O, std::optional<ModelKind>>(
      "--model-kind", [](O& o) -> std::optional<ModelKind>& { return o.model_kind; },
      {{"auto", std::nullopt},
       {serve::model_kind_name(ModelKind::embedding), ModelKind::embedding},
       {serve::model_kind_name(ModelKind::classifier), ModelKind::classifier},
       {serve::model_kind_name(ModelKind::reranker), ModelKind::reranker}},
      "auto, embedding, classifier or reranker (auto: sentence-transformers files embed; a sequence classifier "
      "classifies, with one label it reranks; else embed)",
      kOfferCli));
  add(real_option<O>("--max-wait-ms", [](O& o) -> double& { return o.max_wait_ms; }, 0, 60000,
                     "How long the batcher may wait to fill a batch when the device is idle (0: run at once)",
                     kOfferCli));
  // A timeout of 0 would refuse every request: each is above 0.
  add(real_option<O>("--header-timeout", [](O& o) -> double& { return o.header_timeout_s; }, 0, 86400,
                     "Seconds from a request's first byte to its last header byte", kOfferCli, true));
  add(real_option<O>("--body-timeout", [](O& o) -> double& { return o.body_timeout_s; }, 0, 86400,
                     "Seconds to read a request body (and to write an answer)", kOfferCli, true));
  add(real_option<O>("--idle-timeout", [](O& o) -> double& { return o.idle_timeout_s; }, 0, 86400,
                     "Seconds a keep-alive connection may wait for its next request", kOfferCli, true));
  add(real_option<O>("--drain-timeout", [](O& o) -> double& { return o.drain_timeout_s; }, 0, 86400,
                     "On SIGTERM/SIGINT: seconds to finish the requests in flight before cancelling them", kOfferCli,
                     true));
  add(int_option<O>("--io-threads", [](O& o) -> int64_t& { return o.io_threads; }, 1, 64,
                    "Threads reading requests and writing answers", kOfferCli));
  add(flag_option<O>("--log-requests", [](O& o) -> bool& { return o.log_requests; },
                     "Debugging: one line per request on stderr", kOfferCli));
  return t;
}

}  // namespace

const OptionTable<ServeOptions>& serve_option_table() {
  static const OptionTable<ServeOptions> table = make_table();
  return table;
}

}  // namespace stoke
