#include "apps/stoke/commands.h"

#include <cstdio>
#include <iostream>

#include "apps/stoke/job_flags.h"
#include "apps/stoke/job_reports.h"
#include "apps/stoke/serve_command.h"
#include "core/stop_request.h"
#include "io/hf_hub_cache.h"
#include "jobs/classify_job.h"
#include "jobs/doctor_job.h"
#include "jobs/embed_job.h"
#include "jobs/inspect_job.h"
#include "jobs/tokenize_job.h"
#include "jobs/train_job.h"
#include "jobs/tune_job.h"
#include "jobs/verify_job.h"

namespace stoke::cli {

namespace {

class TokenizeCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("tokenize", "Token ids for every input record, as Hugging Face gives them");
    add_table_flags(cmd_, o_, tokenize_option_table());
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override { return {{cmd_, &o_.common, true}}; }
  int run() override {
    report_tokenize(run_tokenize(o_), o_);
    return 0;
  }

 private:
  CLI::App* cmd_ = nullptr;
  TokenizeOptions o_;
};

class EmbedCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("embed", "Sentence embeddings for every input record, as .npy files + a manifest");
    add_embed_flags(cmd_, cli_, "Output folder (manifest.json, embeddings-NNNNN.npy, ids-NNNNN.jsonl); required");
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override { return {{cmd_, &cli_.o.common, true}}; }
  int run() override {
    cli_.finish();
    cli_.o.cancel = &stop_requested_flag();
    const EmbedSummary s = run_embed(cli_.o);
    report_embed(s, cli_.o);
    return s.cancelled ? stop_exit_status() : 0;
  }
  bool stops_on_signal() const override { return true; }

 private:
  CLI::App* cmd_ = nullptr;
  EmbedCli cli_;
};

class ClassifyCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("classify",
                              "Classifier logits, label and score for every input record (pairs: cross-encoder)");
    add_table_flags(cmd_, o_, classify_option_table());
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override { return {{cmd_, &o_.common, true}}; }
  int run() override {
    o_.cancel = &stop_requested_flag();
    const ClassifySummary s = run_classify(o_);
    report_classify(s, o_);
    return s.cancelled ? stop_exit_status() : 0;
  }
  bool stops_on_signal() const override { return true; }

 private:
  CLI::App* cmd_ = nullptr;
  ClassifyOptions o_;
};

class TrainCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("train", "Fine-tune a sequence classifier; checkpoints load in transformers");
    add_train_flags(cmd_, cli_, "Output folder: checkpoint-STEP/, the final model, log.jsonl, run.json; required");
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override { return {{cmd_, &cli_.o.common, false}}; }
  int run() override {
    cli_.finish(cmd_);
    cli_.o.cancel = &stop_requested_flag();
    const TrainSummary s = run_train(cli_.o);
    report_train(s, cli_.o);
    return s.stopped ? stop_exit_status() : 0;
  }
  bool stops_on_signal() const override { return true; }

 private:
  CLI::App* cmd_ = nullptr;
  TrainCli cli_;
};

// `stoke doctor --trace FILE`, or `doctor embed|train` with the job's flags.
class DoctorCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("doctor", "Say why the device is idle: profile a short run (or read a trace) and "
                                        "name what bounds it, with evidence and advice");
    add_table_flags(cmd_, o_, doctor_option_table(), kDoctorReadsTrace);
    embed_ = cmd_->add_subcommand("embed", "Profile `stoke embed` with these flags");
    add_embed_flags(embed_, embed_cli_,
                    "Output folder for the profiled run (default: a temporary folder, removed after --seconds)");
    add_table_flags(embed_, o_, doctor_option_table(), kDoctorProfilesEmbed);
    train_ = cmd_->add_subcommand("train", "Profile `stoke train` with these flags");
    add_train_flags(train_, train_cli_, "Output folder of the profiled run (default: a temporary folder)");
    add_table_flags(train_, o_, doctor_option_table(), kDoctorProfilesTrain);
    cmd_->require_subcommand(0, 1);
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override {
    return {{embed_, &embed_cli_.o.common, true}, {train_, &train_cli_.o.common, false}};
  }
  int run() override {
    if (embed_->parsed()) {
      embed_cli_.finish();
      o_.job = "embed";
      o_.embed = embed_cli_.o;
    } else if (train_->parsed()) {
      train_cli_.finish(train_);
      o_.job = "train";
      o_.train = train_cli_.o;
    }
    o_.embed.cancel = &stop_requested_flag();
    o_.train.cancel = &stop_requested_flag();
    const DoctorResult r = run_doctor(o_);
    std::printf("%s", r.text.c_str());
    if (!o_.html.empty()) std::printf("\nreport: %s\n", o_.html.c_str());
    return r.stopped ? stop_exit_status() : 0;
  }
  bool stops_on_signal() const override { return true; }

 private:
  CLI::App *cmd_ = nullptr, *embed_ = nullptr, *train_ = nullptr;
  DoctorOptions o_;
  EmbedCli embed_cli_;
  TrainCli train_cli_;
};

// `stoke tune embed|train`, starting from the job's flags.
class TuneCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("tune", "Find faster settings: short trials, one knob at a time, written as a --config file");
    embed_ = cmd_->add_subcommand("embed", "Tune `stoke embed` starting from these flags");
    add_embed_flags(embed_, embed_cli_, nullptr);
    add_table_flags(embed_, embed_o_, tune_option_table());
    train_ = cmd_->add_subcommand("train", "Tune `stoke train` starting from these flags");
    add_train_flags(train_, train_cli_, nullptr);
    add_table_flags(train_, train_o_, tune_train_option_table());
    cmd_->require_subcommand(1);
  }
  bool parsed() const override { return cmd_->parsed(); }
  std::vector<TextCommand> text_commands() override {
    return {{embed_, &embed_cli_.o.common, true}, {train_, &train_cli_.o.common, false}};
  }
  int run() override {
    TuneResult r;
    if (train_->parsed()) {
      train_cli_.finish(train_);
      train_o_.train = train_cli_.o;
      r = run_tune_train(train_o_);
    } else {
      embed_cli_.finish();
      embed_o_.embed = embed_cli_.o;
      r = run_tune(embed_o_);
    }
    std::printf("%s", r.table.c_str());
    return r.interrupted ? stop_exit_status() : 0;
  }
  bool stops_on_signal() const override { return true; }

 private:
  CLI::App *cmd_ = nullptr, *embed_ = nullptr, *train_ = nullptr;
  TuneOptions embed_o_;
  EmbedCli embed_cli_;
  TuneTrainOptions train_o_;
  TrainCli train_cli_;
};

class InspectCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("inspect", "What a model folder, a .safetensors or .npy file, or an output folder holds, "
                                         "validated");
    cmd_->add_option("path", path_,
                     "A model folder, a hub id in the local Hugging Face cache, a .safetensors or .npy file, or an "
                     "embed or train output folder")
        ->required();
  }
  bool parsed() const override { return cmd_->parsed(); }
  int run() override {
    run_inspect(locate_model(path_).dir.string(), std::cout);  // a hub id as --model takes it
    return 0;
  }

 private:
  CLI::App* cmd_ = nullptr;
  std::string path_;
};

class VerifyCommand : public Command {
 public:
  void add_to(CLI::App& app) override {
    cmd_ = app.add_subcommand("verify",
                              "Check that embed output folders (one per task) are complete, consistent and intact");
    cmd_->add_option("folders", folders_,
                     "Output folders: every task's folder of one job (e.g. out/task-*), or one unsplit folder")
        ->required();
  }
  bool parsed() const override { return cmd_->parsed(); }
  int run() override { return report_verify(run_verify(folders_)); }

 private:
  CLI::App* cmd_ = nullptr;
  std::vector<std::string> folders_;
};

}  // namespace

std::vector<std::unique_ptr<Command>> make_commands() {
  std::vector<std::unique_ptr<Command>> c;
  c.push_back(std::make_unique<TokenizeCommand>());
  c.push_back(std::make_unique<EmbedCommand>());
  c.push_back(std::make_unique<ClassifyCommand>());
  c.push_back(std::make_unique<TrainCommand>());
  c.push_back(std::make_unique<DoctorCommand>());
  c.push_back(std::make_unique<TuneCommand>());
  c.push_back(std::make_unique<InspectCommand>());
  c.push_back(std::make_unique<VerifyCommand>());
  c.push_back(make_serve_command());
  return c;
}

}  // namespace stoke::cli
