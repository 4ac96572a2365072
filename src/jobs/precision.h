// --precision: what a job computes in, one enum and one list of its words.
// The option tables (--precision, tune's --try-precisions), the manifests'
// and traces' "precision" fields and Python's job keywords spell a precision
// with these words; everything past the parse holds the enum.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "core/dtype.h"

namespace stoke {

enum class Precision {
  f32,   // the reference (the default: exactness first)
  bf16,  // bf16 weights and activations, f32 accumulation
  f16,   // f16 weights and activations (training: dynamic loss scaling)
  int8,  // embed and classify on the CPU: int8 linears over f32 activations
};

// The words, in the order errors list them: f32, bf16, f16, int8.
const std::vector<std::pair<std::string, Precision>>& precision_words();

// "bf16".
const std::string& precision_name(Precision p);

// One of precision_words(), else Error(invalid_argument) naming flag, value
// and the words: "--try-precisions \"fp8\": expected f32, bf16, f16 or int8".
Precision parse_precision(const std::string& flag, const std::string& text);

// The dtype the activations are computed in (f32 under int8: its linears
// quantize their input themselves).
DType precision_dtype(Precision p);

}  // namespace stoke
