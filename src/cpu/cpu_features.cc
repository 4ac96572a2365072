// What the CPU's GEMM can run natively, asked of oneDNN once: its effective
// ISA is what its matmul will dispatch to (CPUID, OS support for AMX tiles,
// and any ONEDNN_MAX_CPU_ISA limit together), so the answer and the GEMM
// cannot disagree.
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/kernels.h"

namespace stoke::cpu {

namespace {

enum class NativeBf16 { none, avx512_bf16, amx };

NativeBf16 detect() {
  static const NativeBf16 found = [] {
    // The ISA values are nested bit masks: a richer ISA holds every bit of the poorer ones.
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto has = [isa](dnnl::cpu_isa want) {
      const auto w = static_cast<unsigned>(want);
      return (isa & w) == w;
    };
    if (has(dnnl::cpu_isa::avx512_core_amx)) return NativeBf16::amx;
    if (has(dnnl::cpu_isa::avx512_core_bf16)) return NativeBf16::avx512_bf16;
    return NativeBf16::none;
  }();
  return found;
}

}  // namespace

const char* cpu_bf16_support() {
  switch (detect()) {
    case NativeBf16::amx: return "bf16 (AMX)";
    case NativeBf16::avx512_bf16: return "bf16 (AVX512-BF16)";
    case NativeBf16::none: break;
  }
  return "f32 only";
}

bool cpu_has_native_bf16() { return detect() != NativeBf16::none; }

}  // namespace stoke::cpu
