// What the CPU's GEMM can run natively, asked of oneDNN once: its effective
// ISA is what its matmul will dispatch to (CPUID, OS support for AMX tiles,
// and any ONEDNN_MAX_CPU_ISA limit together), so the answer and the GEMM
// cannot disagree.
#include <atomic>
#include <oneapi/dnnl/dnnl.hpp>

#include "cpu/kernels.h"

namespace stoke::cpu {

namespace {

enum class NativeBf16 { none, avx512_bf16, amx };
enum class Int8Dot { none, avx2_vnni, avx512_vnni, amx };

std::atomic<bool> g_hide_bf16{false};
std::atomic<bool> g_hide_int8_dot{false};

// The ISA values are nested bit masks: a richer ISA holds every bit of the poorer ones.
bool isa_has(dnnl::cpu_isa want) {
  static const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto w = static_cast<unsigned>(want);
  return (isa & w) == w;
}

NativeBf16 detect() {
  static const NativeBf16 found = [] {
    if (isa_has(dnnl::cpu_isa::avx512_core_amx)) return NativeBf16::amx;
    if (isa_has(dnnl::cpu_isa::avx512_core_bf16)) return NativeBf16::avx512_bf16;
    return NativeBf16::none;
  }();
  return g_hide_bf16.load(std::memory_order_relaxed) ? NativeBf16::none : found;
}

Int8Dot detect_int8() {
  static const Int8Dot found = [] {
    if (isa_has(dnnl::cpu_isa::avx512_core_amx)) return Int8Dot::amx;
    if (isa_has(dnnl::cpu_isa::avx512_core_vnni)) return Int8Dot::avx512_vnni;
    if (isa_has(dnnl::cpu_isa::avx2_vnni)) return Int8Dot::avx2_vnni;
    return Int8Dot::none;
  }();
  return g_hide_int8_dot.load(std::memory_order_relaxed) ? Int8Dot::none : found;
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

bool cpu_has_int8_dot() { return detect_int8() != Int8Dot::none; }

Int8ActivationCode cpu_int8_activation_code() {
  return cpu_has_int8_dot() ? Int8ActivationCode{255} : Int8ActivationCode{127};
}

const char* cpu_int8_support() {
  switch (detect_int8()) {
    case Int8Dot::amx: return "int8 (AMX)";
    case Int8Dot::avx512_vnni: return "int8 (AVX512-VNNI)";
    case Int8Dot::avx2_vnni: return "int8 (AVX-VNNI)";
    case Int8Dot::none: break;
  }
  return "int8 without VNNI (7-bit activations)";
}

void set_cpu_native_bf16_for_testing(bool present) { g_hide_bf16.store(!present); }
void set_cpu_int8_dot_for_testing(bool present) { g_hide_int8_dot.store(!present); }

}  // namespace stoke::cpu
