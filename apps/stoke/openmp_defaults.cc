// libgomp reads its environment once, in a constructor that runs before
// main(). With neither OMP_WAIT_POLICY nor GOMP_SPINCOUNT set it picks a
// throttled spin between parallel regions that makes the many small regions
// of a small model slow (the tiny BERT's training: 215 vs ~1,300 samples/s
// when first measured) and, above all, collapses under contention: with two
// busy processes on the 2 cores, 40 training steps of 32 took 10.8 s against
// 1.8 s with GOMP_SPINCOUNT=1000, and tiny-batch embedding 26x its idle time
// (bench/contention, docs/performance.md 2026-12-01).
//
// The default must therefore be in the environment libgomp reads. A setenv()
// in .preinit_array is not enough: it runs before libc's own initialiser,
// which resets `environ` to the array the kernel passed, so the variable was
// lost before libgomp looked (measured: getenv("GOMP_SPINCOUNT") was NULL at
// the first parallel region). So the preinit function re-executes the binary
// once with the variable added (execve of /proc/self/exe: same pid, same
// argv; ~ms). It does nothing when the user set OMP_WAIT_POLICY or
// GOMP_SPINCOUNT — their choice always wins — nor with
// STOKE_OPENMP_DEFAULTS=off (libgomp's own default, which bench/contention
// measures). Where /proc is missing the exec fails and stoke runs on with
// libgomp's default.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string_view>

namespace {

// bench/contention, 2 cores: the fastest idle (0 and passive sleep at once
// and cost tiny-batch embedding 1.65x; 10,000 was 2-9% slower), and 2-3x
// its idle time with two busy processes beside it (libgomp's default: 13-27x).
constexpr const char* kDefaultWait = "GOMP_SPINCOUNT=1000";

// The value of `name` in envp, or nullptr. (getenv() cannot be used yet:
// libc's `environ` is set by its initialiser, which runs after this.)
const char* variable(char** envp, std::string_view name) {
  for (char** e = envp; e && *e; ++e)
    if (std::strncmp(*e, name.data(), name.size()) == 0 && (*e)[name.size()] == '=') return *e + name.size() + 1;
  return nullptr;
}

void set_openmp_wait_default(int, char** argv, char** envp) {
  if (variable(envp, "OMP_WAIT_POLICY") != nullptr || variable(envp, "GOMP_SPINCOUNT") != nullptr) return;
  const char* off = variable(envp, "STOKE_OPENMP_DEFAULTS");
  if (off != nullptr && std::string_view(off) == "off") return;
  size_t n = 0;
  while (envp && envp[n]) ++n;
  char** env = static_cast<char**>(std::malloc((n + 2) * sizeof(char*)));
  if (env == nullptr) return;
  for (size_t i = 0; i < n; ++i) env[i] = envp[i];
  env[n] = const_cast<char*>(kDefaultWait);
  env[n + 1] = nullptr;
  ::execve("/proc/self/exe", argv, env);  // returns only on failure: carry on with libgomp's default
  std::free(env);
}

}  // namespace

__attribute__((section(".preinit_array"), used)) static void (*const stoke_openmp_defaults)(int, char**, char**) =
    set_openmp_wait_default;
