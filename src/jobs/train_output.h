// The train output folder (DESIGN "Safety rules", RELIABILITY 14-15): locked
// for the whole run before anything in it is looked at; never the model being
// trained (nor inside it); fresh, resumed from its newest valid checkpoint, or
// overwritten — and --overwrite removes only what an earlier stoke training
// run wrote there (its checkpoints, the files its final model's or its
// checkpoints' checksums.json list, log.jsonl, run.json, temp files),
// refusing, by name, anything else.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "io/folder_lock.h"
#include "jobs/train_job.h"

namespace stoke {

struct TrainOutputStart {
  FolderLock lock;                  // held until the run ends
  std::filesystem::path resume_dir;  // the checkpoint to resume from; empty for a fresh start
  std::vector<std::string> notes;   // damaged checkpoints passed by, the lock kind
};

// Throws Error(refused) for --output equal to or inside --model, for a folder
// another job holds, for output present without --resume/--overwrite, and
// for --overwrite of a folder holding files no stoke run wrote.
TrainOutputStart prepare_train_output(const TrainOptions& options);

}  // namespace stoke
