// libgomp reads its environment once, in a constructor that runs before
// main(), and with neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set it picks a
// throttled wait between parallel regions that made the training step of a
// small model 6x slower here (215 vs 1,300-1,400 samples/s for the tiny BERT;
// any explicit spin count, 0 to 3,000,000, gave the fast figure; docs/
// performance.md). The executable's .preinit_array runs before any shared
// library's constructors, so the default is set there — only when the user
// set neither variable: their choice always wins. STOKE_OPENMP_DEFAULTS=off
// leaves libgomp's own default in place (bench/contention measures it).
#include <cstdlib>
#include <string_view>

namespace {

void set_openmp_wait_default(int, char**, char**) {
  const char* off = std::getenv("STOKE_OPENMP_DEFAULTS");
  if (off != nullptr && std::string_view(off) == "off") return;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr)
    setenv("GOMP_SPINCOUNT", "10000", 0);  // spin ~ a few microseconds, then sleep: kind to 2 shared cores
}

}  // namespace

__attribute__((section(".preinit_array"), used)) static void (*const stoke_openmp_defaults)(int, char**, char**) =
    set_openmp_wait_default;
