// stoke.embed_job and the verify check load_embeddings runs first: the job
// functions of src/jobs, called as the CLI calls them.
#pragma once

#include <nanobind/nanobind.h>

namespace stoke::py {

void register_jobs(nanobind::module_& m);

}  // namespace stoke::py
