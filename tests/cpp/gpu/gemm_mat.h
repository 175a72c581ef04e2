// GEMM operands of the GPU tests (test_gemm.cpp, test_gemm_act.cpp): a batched matrix in either
// orientation over a poisoned (NaN) buffer, with the conversion between its logical values and
// the buffer's order.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gpu/gpu_util.h"
#include "quack/tensor.h"

namespace quack::test {

inline int64_t round_up(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

// One operand: per batch an (R, C) matrix, row-major (rows ld apart) or column-major (columns ld
// apart), ld = the contiguous extent rounded up to 16 bytes plus `pad` (tight: the contiguous
// extent itself plus `pad`, so not a 16-byte multiple for odd extents), batches one matrix apart,
// the first element `offset` elements into the buffer (offset 1: a base TMA cannot address).
// The memory is a 2-D row-major buffer: (L·R, C) for row-major, and for column-major the
// (L·C, R) of the transposed batches, so the test helpers (upload, download, gaps_untouched)
// apply. `arg` is the (R, C) or (L, R, C) view handed to gemm.
struct Mat {
  DeviceTensor mem;
  TensorRef arg;
  bool col = false;
  int64_t L = 1, R = 0, C = 0;
};

inline Mat make_mat(DType t, int64_t L, int64_t R, int64_t C, char orient, int64_t pad, bool tight = false,
                    int64_t offset = 0) {
  Mat m;
  m.col = orient == 'c';
  m.L = L;
  m.R = R;
  m.C = C;
  const int64_t inner = m.col ? R : C, outer = m.col ? C : R;
  const int64_t ld = (tight ? std::max<int64_t>(inner, 1) : round_up(std::max<int64_t>(inner, 1), 16 / dtype_size(t))) + pad;
  Layout lay;
  lay.row_stride = ld;
  lay.offset = offset;
  m.mem = alloc_tensor(t, L * outer, inner, lay);  // NaN
  void* p = m.mem.ref.data;
  const int64_t sr = m.col ? 1 : ld, sc = m.col ? ld : 1;
  m.arg = L == 1 ? TensorRef::matrix(p, t, R, C, 0, sr, sc) : TensorRef::batched(p, t, L, R, C, 0, outer * ld, sr, sc);
  return m;
}

// Logical values [l][r][c] <-> the memory buffer's dense row-major order (for a column-major
// matrix, per batch the transpose).
inline std::vector<double> convert(const Mat& m, const std::vector<double>& v, bool to_mem) {
  if (!m.col) return v;
  std::vector<double> out(v.size());
  for (int64_t l = 0; l < m.L; ++l)
    for (int64_t r = 0; r < m.R; ++r)
      for (int64_t c = 0; c < m.C; ++c) {
        const size_t logical = size_t((l * m.R + r) * m.C + c), memory = size_t((l * m.C + c) * m.R + r);
        out[to_mem ? memory : logical] = v[to_mem ? logical : memory];
      }
  return out;
}
inline std::vector<double> to_memory(const Mat& m, const std::vector<double>& v) { return convert(m, v, true); }
inline std::vector<double> from_memory(const Mat& m, const std::vector<double>& v) { return convert(m, v, false); }

// The float64 reference's sums of one row of a batched product: for row r = l·M + i of the
// logical a (L·M, K) and b (L, K, n) (dense row-major; n: every column of b, or the checked
// columns gathered, gather_cols), s[j] = Σ_k a·b and s_abs[j] = Σ_k |a·b| for j < n. Each
// column's sum is added in the order k = 0 … K − 1, as a column-by-column walk adds it (the same
// values), but the walk runs along b's rows: a column at a time it strides b by n doubles, a
// cache miss per product (~2-5 ns at n = 1000-4096, against < 1 ns here). Columns in blocks of
// 256 keep the partial sums in L1.
inline void ref_row_sums(const std::vector<double>& a, const std::vector<double>& b, int64_t r, int64_t l, int64_t n,
                         int64_t K, std::vector<double>& s, std::vector<double>& s_abs) {
  s.assign(size_t(n), 0.0);
  s_abs.assign(size_t(n), 0.0);
  constexpr int64_t kBlock = 256;
  for (int64_t j0 = 0; j0 < n; j0 += kBlock) {
    const int64_t j1 = std::min(n, j0 + kBlock);
    double* sp = s.data();
    double* ap = s_abs.data();
    for (int64_t k = 0; k < K; ++k) {
      const double av = a[size_t(r * K + k)];
      const double* br = b.data() + (l * K + k) * n;
      for (int64_t j = j0; j < j1; ++j) {
        const double t = av * br[j];
        sp[j] += t;
        ap[j] += std::fabs(t);
      }
    }
  }
}

// The columns `cols` of the logical b (L, K, N): (L, K, cols.size()), for ref_row_sums on a
// sample of columns.
inline std::vector<double> gather_cols(const std::vector<double>& b, int64_t L, int64_t K, int64_t N,
                                       const std::vector<int64_t>& cols) {
  const size_t n = cols.size();
  std::vector<double> out(size_t(L * K) * n);
  for (int64_t lk = 0; lk < L * K; ++lk)
    for (size_t q = 0; q < n; ++q) out[size_t(lk) * n + q] = b[size_t(lk * N + cols[q])];
  return out;
}

}  // namespace quack::test
