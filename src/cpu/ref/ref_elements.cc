// Element access and activations shared by the reference kernels.
#include "core/error.h"
#include "core/half.h"
#include "cpu/ref/ref_ops.h"

namespace stoke::cpu::ref {

double load(const TensorView& t, int64_t i) {
  switch (t.dtype) {
    case DType::f32: return t.as<const float>()[i];
    case DType::bf16: return to_float(t.as<const bf16>()[i]);
    case DType::f16: return to_float(t.as<const f16>()[i]);
    default: throw Error(Errc::internal, "ref::load: not a float tensor");
  }
}

void store(const TensorView& t, int64_t i, double v) {
  const float f = static_cast<float>(v);
  switch (t.dtype) {
    case DType::f32: t.as<float>()[i] = f; return;
    case DType::bf16: t.as<bf16>()[i] = to_bf16(f); return;
    case DType::f16: t.as<f16>()[i] = to_f16(f); return;
    default: throw Error(Errc::internal, "ref::store: not a float tensor");
  }
}

int32_t index_at(const TensorView& t, int64_t i) { return t.as<const int32_t>()[i]; }

double activate(double x, Activation act) {
  switch (act) {
    case Activation::none: return x;
    case Activation::gelu_erf: return gelu_erf(x);
    case Activation::tanh: return std::tanh(x);
    case Activation::relu: return x > 0 ? x : 0.0;
  }
  throw Error(Errc::invalid_argument, "unknown activation");
}

}  // namespace stoke::cpu::ref
