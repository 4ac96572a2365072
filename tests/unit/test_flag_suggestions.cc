// The messages for a flag or command the command line does not have
// (apps/stoke/flag_suggestions.h), as pure functions over made-up commands:
// a name from sentence-transformers, TEI or the Hugging Face Trainer becomes
// the flag to use — only one the command has — a slip gets "did you mean", a
// flag of another command says which, and nothing close says where the
// flags are listed. tests/unit/test_cli_flags.cc checks the same lines from
// the real binary, whose flags the parser gives.
#include <gtest/gtest.h>

#include "apps/stoke/flag_suggestions.h"

namespace stoke::cli {
namespace {

const CommandFlags kEmbed = {"stoke embed",
                             {"--help", "-h", "--model", "--input", "--id-field", "--max-length", "--precision",
                              "--batch-tokens", "--max-batch-size", "--normalize", "--no-normalize", "--pooling",
                              "--dimensions", "--output-dtype", "--output"}};
const CommandFlags kTuneEmbed = {"stoke tune embed",
                                 {"--help", "--model", "--input", "--max-length", "--precision", "--batch-tokens",
                                  "--max-batch-size", "--output-dtype", "--seconds-per-trial", "--write-config"}};
const CommandFlags kTrain = {"stoke train",
                             {"--help", "--model", "--train", "--input", "--max-length", "--precision", "--batch-size",
                              "--max-batch-size", "--lr", "--epochs", "--grad-accum", "--seed", "--warmup-steps",
                              "--warmup-ratio", "--output"}};
const CommandFlags kTuneTrain = {"stoke tune train", {"--help", "--model", "--train", "--batch-size", "--lr", "--seed"}};
const CommandFlags kServe = {"stoke serve",
                             {"--help", "--model", "--max-length", "--precision", "--workers", "--batch-tokens",
                              "--host", "--port", "--max-client-batch-size", "--max-batch-size", "--io-threads"}};
const CommandFlags kTokenize = {"stoke tokenize", {"--help", "--model", "--input", "--max-length", "--workers", "--output"}};
const CommandFlags kDoctor = {"stoke doctor", {"--help", "--trace", "--html"}};
const CommandFlags kDoctorEmbed = {"stoke doctor embed", {"--help", "--model", "--input", "--seconds", "--html"}};
const std::vector<CommandFlags> kAll = {kTokenize, kEmbed, kTrain, kDoctor, kDoctorEmbed, kTuneEmbed, kTuneTrain, kServe};

std::string flag(const CommandFlags& c, const std::string& token) { return unknown_flag_message(c, token, kAll); }

TEST(FlagSuggestions, CloseNamesAreSlipsOfTheCommandsOwnFlags) {
  using V = std::vector<std::string>;
  EXPECT_EQ(close_names("--normalise", kEmbed.flags), V{"--normalize"});
  EXPECT_EQ(close_names("--max-lenght", kEmbed.flags), V{"--max-length"});  // swapped letters: one slip
  EXPECT_EQ(close_names("--modle", kEmbed.flags), V{"--model"});
  EXPECT_EQ(close_names("--inputs", kEmbed.flags), V{"--input"});
  EXPECT_EQ(close_names("--dim", kEmbed.flags), V{"--dimensions"});  // cut short inside a word
  EXPECT_EQ(close_names("--norm", kEmbed.flags), (V{"--normalize"}));
  // A whole word that begins a longer flag is another setting.
  EXPECT_EQ(close_names("--output", kTuneEmbed.flags), V{});
  // Two or three letters: no edits allowed (--lr is no slip of --id).
  EXPECT_EQ(close_names("--lr", {"--id"}), V{});
  // Far from everything.
  EXPECT_EQ(close_names("--frobnicate", kEmbed.flags), V{});
  EXPECT_EQ(close_names("--pair-field", kEmbed.flags), V{});
  // Commands too, without dashes.
  EXPECT_EQ(close_names("embedd", {"tokenize", "embed", "train"}), V{"embed"});
  EXPECT_EQ(close_names("trian", {"tokenize", "embed", "train"}), V{"train"});
}

TEST(FlagSuggestions, TheCommandsOwnSpelling) {
  EXPECT_EQ(flag(kEmbed, "--batch_tokens"), "unknown flag --batch_tokens for `stoke embed`: it is spelled --batch-tokens");
  EXPECT_EQ(flag(kEmbed, "--batch_tokens=64"),
            "unknown flag --batch_tokens for `stoke embed`: it is spelled --batch-tokens");
  EXPECT_EQ(flag(kEmbed, "--Batch-Tokens"), "unknown flag --Batch-Tokens for `stoke embed`: it is spelled --batch-tokens");
  EXPECT_EQ(flag(kEmbed, "-batch-tokens"), "unknown flag -batch-tokens for `stoke embed`: it is spelled --batch-tokens");
  EXPECT_EQ(flag(kTrain, "--warmup_ratio"), "unknown flag --warmup_ratio for `stoke train`: it is spelled --warmup-ratio");
}

TEST(FlagSuggestions, OtherToolsNamesBecomeTheFlagsTheCommandHas) {
  // sentence-transformers' batch_size: sequences to one reader, a budget to another; both where both exist.
  EXPECT_EQ(flag(kEmbed, "--batch-size"), "unknown flag --batch-size for `stoke embed`: use --max-batch-size "
                                          "(sequences per batch) or --batch-tokens (a token budget per batch)");
  EXPECT_EQ(flag(kServe, "--batch-size"), "unknown flag --batch-size for `stoke serve`: use --max-batch-size "
                                          "(sequences per batch) or --batch-tokens (a token budget per batch)");
  EXPECT_EQ(flag(kEmbed, "--max-seq-length"), "unknown flag --max-seq-length for `stoke embed`: use --max-length");
  EXPECT_EQ(flag(kEmbed, "--max_seq_length"), "unknown flag --max_seq_length for `stoke embed`: use --max-length");
  EXPECT_EQ(flag(kEmbed, "--normalise"), "unknown flag --normalise for `stoke embed`: use --normalize");
  EXPECT_EQ(flag(kEmbed, "--pooling-mode"), "unknown flag --pooling-mode for `stoke embed`: use --pooling");
  // TEI
  EXPECT_EQ(flag(kServe, "--model-id"), "unknown flag --model-id for `stoke serve`: use --model");
  EXPECT_EQ(flag(kServe, "--hostname"), "unknown flag --hostname for `stoke serve`: use --host");
  EXPECT_EQ(flag(kServe, "--max-batch-tokens"), "unknown flag --max-batch-tokens for `stoke serve`: use --batch-tokens");
  EXPECT_EQ(flag(kEmbed, "--dtype"), "unknown flag --dtype for `stoke embed`: use --precision (what the model "
                                     "computes in) or --output-dtype (what the .npy files hold)");
  EXPECT_EQ(flag(kServe, "--dtype"), "unknown flag --dtype for `stoke serve`: use --precision (what the model computes in)");
  EXPECT_EQ(flag(kServe, "--threads"), "unknown flag --threads for `stoke serve`: use --workers (tokenizer threads) or "
                                       "--io-threads (threads reading requests)");
  // The Hugging Face Trainer
  EXPECT_EQ(flag(kTrain, "--output-dir"), "unknown flag --output-dir for `stoke train`: use --output");
  EXPECT_EQ(flag(kTrain, "--output_dir"), "unknown flag --output_dir for `stoke train`: use --output");
  EXPECT_EQ(flag(kTrain, "--num-train-epochs"), "unknown flag --num-train-epochs for `stoke train`: use --epochs");
  EXPECT_EQ(flag(kTrain, "--learning-rate"), "unknown flag --learning-rate for `stoke train`: use --lr");
  EXPECT_EQ(flag(kTrain, "--per-device-train-batch-size"),
            "unknown flag --per-device-train-batch-size for `stoke train`: use --batch-size");
  EXPECT_EQ(flag(kEmbed, "--per_device_train_batch_size"),
            "unknown flag --per_device_train_batch_size for `stoke embed`: use --max-batch-size (sequences per batch) "
            "or --batch-tokens (a token budget per batch)");
  EXPECT_EQ(flag(kTrain, "--gradient-accumulation-steps"),
            "unknown flag --gradient-accumulation-steps for `stoke train`: use --grad-accum");
  EXPECT_EQ(flag(kTrain, "--warmup"), "unknown flag --warmup for `stoke train`: use --warmup-steps (steps) or "
                                      "--warmup-ratio (a share of all steps)");
  EXPECT_EQ(flag(kTrain, "--bf16"), "unknown flag --bf16 for `stoke train`: use --precision bf16");
}

TEST(FlagSuggestions, AFlagOfAnotherCommandNamesIt) {
  EXPECT_EQ(flag(kEmbed, "--hostname"), "unknown flag --hostname for `stoke embed`: stoke calls it --host, a flag of "
                                        "`stoke serve`");
  EXPECT_EQ(flag(kEmbed, "--learning-rate"), "unknown flag --learning-rate for `stoke embed`: stoke calls it --lr, a "
                                             "flag of `stoke train`");
  // The fewest words: `stoke train`, not `stoke tune train`.
  EXPECT_EQ(flag(kEmbed, "--lr"), "unknown flag --lr for `stoke embed`: --lr is a flag of `stoke train`");
  EXPECT_EQ(flag(kEmbed, "--warmup-ratio"), "unknown flag --warmup-ratio for `stoke embed`: --warmup-ratio is a flag of "
                                            "`stoke train`");
  EXPECT_EQ(flag(kEmbed, "--seed"), "unknown flag --seed for `stoke embed`: nothing in it is random (the same input "
                                    "gives the same output); --seed is a flag of `stoke train`");
  EXPECT_EQ(flag(kEmbed, "--max-client-batch-size"),
            "unknown flag --max-client-batch-size for `stoke embed`: it limits the texts of one request; "
            "--max-client-batch-size is a flag of `stoke serve`");
  EXPECT_EQ(flag(kServe, "--pooling"), "unknown flag --pooling for `stoke serve`: the model folder decides how it pools "
                                       "(1_Pooling/config.json); --pooling is a flag of `stoke embed`");
  EXPECT_EQ(flag(kTuneEmbed, "--seconds"), "unknown flag --seconds for `stoke tune embed`: --seconds is a flag of "
                                           "`stoke doctor embed`");
  // Given before the job was named: the command's own subcommands.
  EXPECT_EQ(flag(kDoctor, "--model"), "unknown flag --model for `stoke doctor`: --model is a flag of `stoke doctor "
                                      "embed` (name the command before its flags)");
}

TEST(FlagSuggestions, AFlagLeftOutOnPurposeSaysWhy) {
  EXPECT_EQ(flag(kTuneEmbed, "--output"), "unknown flag --output for `stoke tune embed`: tune's trials write to "
                                          "temporary folders; give --output to the job you run with the tuned --config");
  EXPECT_EQ(flag(kTokenize, "--batch-size"), "unknown flag --batch-size for `stoke tokenize`: tokenize forms no batches");
  EXPECT_EQ(flag(kTokenize, "--precision"), "unknown flag --precision for `stoke tokenize`: tokenize runs no model");
  // Not a near miss of --id-field.
  EXPECT_EQ(flag(kEmbed, "--pair-field"), "unknown flag --pair-field for `stoke embed`: embed reads one text per record");
  EXPECT_EQ(flag(kTrain, "--batch-tokens"), "unknown flag --batch-tokens for `stoke train`: use --batch-size (examples "
                                            "per micro-batch)");
}

TEST(FlagSuggestions, SlipsAndTheRest) {
  EXPECT_EQ(flag(kEmbed, "--max-lenght"), "unknown flag --max-lenght for `stoke embed`: did you mean --max-length?");
  EXPECT_EQ(flag(kEmbed, "--dim"), "unknown flag --dim for `stoke embed`: did you mean --dimensions?");
  EXPECT_EQ(flag(kEmbed, "--frobnicate"), "unknown flag --frobnicate for `stoke embed` (`stoke embed --help` lists its "
                                          "flags)");
  // Without the other commands, only the command's own flags are looked at.
  EXPECT_EQ(unknown_flag_message(kEmbed, "--lr"), "unknown flag --lr for `stoke embed` (`stoke embed --help` lists its "
                                                  "flags)");
}

TEST(FlagSuggestions, CommandsAndArguments) {
  const std::vector<std::string> top = {"tokenize", "embed", "train", "tune"};
  EXPECT_EQ(unknown_command_message("stoke", top, "embedd"),
            "unknown command \"embedd\" for `stoke`: did you mean `stoke embed`?");
  EXPECT_EQ(unknown_command_message("stoke", top, "foo"),
            "unknown command \"foo\" for `stoke`: expected tokenize, embed, train or tune");
  EXPECT_EQ(unknown_command_message("stoke tune", {"embed", "train"}, ""), "`stoke tune` needs a command: embed or train");
  EXPECT_EQ(unexpected_argument_message("stoke embed", "foo"),
            "unexpected argument \"foo\" for `stoke embed` (`stoke embed --help` says what it takes)");
}

}  // namespace
}  // namespace stoke::cli
