#include "apps/stoke/serve_command.h"

#include "apps/stoke/job_flags.h"
#include "serve/serve_job.h"

namespace stoke::cli {

namespace {

class ServeCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("serve", "An HTTP embedding, classification and reranking server (TEI and OpenAI APIs) "
                                       "that batches across requests");
    add_table_flags(cmd_, o_, serve_option_table());
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
