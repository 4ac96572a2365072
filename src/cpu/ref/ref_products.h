// The reference GEMMs' inner loop, written so that the oracle is fast enough
// to check the model's shapes inside a device call (a GPU is lent for minutes:
// the plain dot-product loop over a transposed operand walked a 6 KB stride
// at ~5 ns a multiply-add, half a minute for one FFN-sized case).
#pragma once

#include <algorithm>
#include <cstdint>

namespace stoke::cpu::ref {

// acc[i, l] += x[i, 0] * y[0, l] + x[i, 1] * y[1, l] + ... + x[i, J-1] * y[J-1, l]
// for every i < I, l < L; x row-major [I, J], y row-major [J, L], acc [I, L],
// all double. Each element adds its J products one at a time in ascending j,
// the order of the plain loop `for j: sum += x[i,j] * y[j,l]`, so the result
// is the plain loop's whatever the blocking. Rows of acc are taken in blocks
// that stay in cache while y streams through once per block; the inner loop
// runs along l, contiguous in acc and y.
inline void accumulate_products(double* acc, const double* x, const double* y, int64_t I, int64_t J, int64_t L) {
  const int64_t rows_per_block = std::max<int64_t>(1, (int64_t{32} << 10) / std::max<int64_t>(L, 1));  // ~256 KB of acc
  for (int64_t i0 = 0; i0 < I; i0 += rows_per_block) {
    const int64_t i1 = std::min(I, i0 + rows_per_block);
    for (int64_t j = 0; j < J; ++j) {
      const double* yj = y + j * L;
      for (int64_t i = i0; i < i1; ++i) {
        const double xij = x[i * J + j];
        double* acc_i = acc + i * L;
        for (int64_t l = 0; l < L; ++l) acc_i[l] += xij * yj[l];
      }
    }
  }
}

}  // namespace stoke::cpu::ref
