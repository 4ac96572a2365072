#include "apps/stoke/job_flags.h"

#include "apps/stoke/option_flags.h"

namespace stoke::cli {

void add_embed_flags(CLI::App* embed, EmbedCli& cli, const char* output_help) {
  const unsigned use = kEmbedFlags | (output_help ? kEmbedOutputOptions : 0u);
  CLI::Option *normalize = nullptr, *no_normalize = nullptr;
  for (const Option<EmbedOptions>& e : embed_option_table()) {
    if (!(e.offer & kOfferCli) || !job_takes(e, use)) continue;
    Option<EmbedOptions> entry = e;
    if (entry.flag == "--output") entry.help = output_help;  // what --output means under this command
    CLI::Option* opt = add_table_option(embed, cli.o, entry);
    if (entry.flag == "--normalize") normalize = opt;
    if (entry.flag == "--no-normalize") no_normalize = opt;
  }
  if (normalize && no_normalize) no_normalize->excludes(normalize);
}

void add_train_flags(CLI::App* train, TrainCli& cli, const char* output_help) {
  const unsigned use = kTrainFlags | (output_help ? kTrainOutputOptions : 0u);
  for (const Option<TrainOptions>& e : train_option_table()) {
    if (!(e.offer & kOfferCli) || !job_takes(e, use)) continue;
    Option<TrainOptions> entry = e;
    if (entry.flag == "--output") entry.help = output_help;  // what --output means under this command
    if (entry.value_optional) {  // --resume [CHECKPOINT]: set in TrainCli::finish
      train->add_option(entry.flag, cli.resume, entry.help)->expected(0, 1);
      continue;
    }
    add_table_option(train, cli.o, entry);
  }
}

}  // namespace stoke::cli
