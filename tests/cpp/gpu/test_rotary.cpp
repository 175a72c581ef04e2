// Tier 2: apply_rotary and rotary_qkv_pack (quack/rotary.h) on the device against a float64
// reference. Skips without a GPU.
//
//   RotaryCases   packed qkv (B, S, 3, H, D) slices (contiguous, and the strides of autograd's
//                 stacked gradient), q only, GQA (Hk ≠ H), rotary_dim < D, seqlen_offset,
//                 conjugate (the backward), in place, odd S, D and rotary_dim off the vector
//                 path, a misaligned base, cos/sin as a column slice of a wider table, more
//                 tokens than the grid (grid-stride), every dtype. Outputs poisoned (NaN) first;
//                 the bytes around each output must stay poisoned.
//   RotaryEmpty   B = 0, S = 0, H = 0 launch nothing and leave the outputs untouched.
//   RotaryPack    rotary_qkv_pack: dq, dk, dv (contiguous or strided, each present or absent)
//                 into a poisoned packed (B, S, 3, H, D): the inverse rotation of dq and dk,
//                 dv copied exactly, exact zeros for an absent one; the vector and
//                 element-at-a-time kernels, rotary_dim < D, seqlen_offset.
//   Both suites also run the interleaved pair layout (`interleaved`: pairs (2i, 2i + 1) by
//   angle i) on and off the vector path ("_il" cases).
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu/gpu_util.h"
#include "quack/rotary.h"
#include "reference/random.h"
#include "rotary/rotary_internal.h"

namespace quack::test {
namespace {

// A 5-D (B, S, G, H, D) strided tensor in one poisoned device buffer (G = 3 for packed qkv,
// 1 otherwise); slice(g) is the (B, S, H, D) TensorRef of group g.
struct Tensor5 {
  DType dtype = DType::kBFloat16;
  int64_t shape[5] = {0, 0, 0, 0, 0};
  int64_t stride[5] = {0, 0, 0, 0, 0};
  int64_t offset = 0;  // elements skipped at the start of the buffer
  std::vector<unsigned char> host;  // the buffer's image
  DeviceBuffer buf;

  int64_t span() const {
    int64_t e = offset + 1;
    for (int i = 0; i < 5; ++i) {
      if (shape[i] == 0) return offset;
      e += (shape[i] - 1) * stride[i];
    }
    return e;
  }
  int64_t at(int64_t b, int64_t s, int64_t g, int64_t h, int64_t d) const {
    return offset + b * stride[0] + s * stride[1] + g * stride[2] + h * stride[3] + d * stride[4];
  }
  TensorRef slice(int64_t g) const {
    TensorRef r;
    r.data = static_cast<char*>(buf.get()) + (offset + g * stride[2]) * dtype_size(dtype);
    r.dtype = dtype;
    r.ndim = 4;
    const int map[4] = {0, 1, 3, 4};
    for (int i = 0; i < 4; ++i) {
      r.shape[i] = shape[map[i]];
      r.stride[i] = stride[map[i]];
    }
    r.device = 0;
    return r;
  }
  double get(int64_t e) const { return load_as(dtype, host.data() + e * dtype_size(dtype)); }
  void set(int64_t e, double v) {
    store_as(dtype, static_cast<float>(v), host.data() + e * dtype_size(dtype));
  }
  void upload() {
    ASSERT_EQ(cudaMemcpy(buf.get(), host.data(), host.size(), cudaMemcpyHostToDevice), cudaSuccess);
  }
  void download() {
    ASSERT_EQ(cudaMemcpy(host.data(), buf.get(), host.size(), cudaMemcpyDeviceToHost), cudaSuccess);
  }
};

// Strides of a dense tensor whose dimensions, outermost first, are `order` (indices into the
// 5 dims), e.g. {0, 1, 2, 3, 4} row-major, {0, 3, 2, 1, 4} the (B, H, G, S, D) stack that
// autograd builds for the gradient of out.transpose(1, 3).unbind(2).
Tensor5 make5(DType t, const int64_t (&shape)[5], const int (&order)[5], int64_t pad_d = 0,
              int64_t offset = 0) {
  Tensor5 x;
  x.dtype = t;
  x.offset = offset;
  for (int i = 0; i < 5; ++i) x.shape[i] = shape[i];
  int64_t st = 1;
  for (int k = 4; k >= 0; --k) {
    const int i = order[k];
    x.stride[i] = st;
    st *= shape[i] + (i == 4 ? pad_d : 0);
  }
  const int64_t n = x.span() > 0 ? x.span() : 1;
  x.host.assign(static_cast<size_t>(n * dtype_size(t)), 0xFF);  // poison (NaN) everywhere
  x.buf = DeviceBuffer(static_cast<size_t>(n * dtype_size(t)));
  return x;
}

void fill_random(Tensor5& x, Rng& rng) {
  for (int64_t b = 0; b < x.shape[0]; ++b)
    for (int64_t s = 0; s < x.shape[1]; ++s)
      for (int64_t g = 0; g < x.shape[2]; ++g)
        for (int64_t h = 0; h < x.shape[3]; ++h)
          for (int64_t d = 0; d < x.shape[4]; ++d) {
            double v;
            do v = round_to(x.dtype, static_cast<float>(rng.normal()));
            while (v == 0.0);
            x.set(x.at(b, s, g, h, d), v);
          }
}

struct Case {
  std::string name;
  DType dtype;
  int64_t B, S, H, D, half;
  int groups = 3;         // 3: packed qkv (q, k rotated, v copied); 1: q only
  int64_t Hk = -1;        // k and v heads (separate tensors, GQA) when ≥ 0
  bool grad_layout = false;  // qkv with the (B, H, 3, S, D) strides of autograd's stack
  int64_t seqlen_offset = 0;
  bool conjugate = false;
  bool in_place = false;
  int64_t offset = 0;     // elements skipped before the input's base (misaligned)
  int64_t cs_pad = 0;     // cos/sin rows wider than half by this many columns
  int64_t pad_d = 0;      // input D padded (head stride > D)
  bool expect_vec = true;
  bool interleaved = false;  // pairs (2i, 2i + 1), else (i, i + half)
};

// The float64 reference of one rotated column d < 2·half of a head: x(col) reads the head's
// input at a column, cs / sn the pair's cos and (signed) sin at column j of the table.
template <class X, class Table>
double ref_rotated(int64_t d, int64_t half, bool interleaved, X x, Table cs_sn) {
  const int64_t j = interleaved ? d / 2 : d % half;
  double cs, sn;
  cs_sn(j, &cs, &sn);
  const int64_t c0 = interleaved ? 2 * j : j, c1 = interleaved ? 2 * j + 1 : j + half;
  const double x1 = x(c0), x2 = x(c1);
  return d == c0 ? x1 * cs - x2 * sn : x2 * cs + x1 * sn;
}

std::string case_name(const ::testing::TestParamInfo<Case>& info) { return info.param.name; }

class RotaryCases : public GpuTest, public ::testing::WithParamInterface<Case> {};

TEST_P(RotaryCases, MatchesReference) {
  const Case c = GetParam();
  Rng rng(1234 + c.B * 7 + c.S * 13 + c.D);
  const int64_t S_ro = c.S + c.seqlen_offset + 3;
  // cos/sin: RoPE tables (base 10000) in fp32, as a (S_ro, half) view of (S_ro, half + pad).
  const int64_t cw = c.half + c.cs_pad;
  std::vector<float> cos_h(static_cast<size_t>(S_ro * cw)), sin_h(cos_h.size());
  for (int64_t p = 0; p < S_ro; ++p)
    for (int64_t j = 0; j < cw; ++j) {
      const double inv = std::pow(10000.0, -2.0 * static_cast<double>(j % c.half) /
                                               static_cast<double>(2 * c.half));
      const double ang = static_cast<double>(p) * inv + 0.1 * static_cast<double>(j);
      cos_h[static_cast<size_t>(p * cw + j)] = static_cast<float>(std::cos(ang));
      sin_h[static_cast<size_t>(p * cw + j)] = static_cast<float>(std::sin(ang));
    }
  DeviceBuffer cos_d(cos_h.size() * 4), sin_d(sin_h.size() * 4);
  QUACK_CUDA_OK(cudaMemcpy(cos_d.get(), cos_h.data(), cos_h.size() * 4, cudaMemcpyHostToDevice));
  QUACK_CUDA_OK(cudaMemcpy(sin_d.get(), sin_h.data(), sin_h.size() * 4, cudaMemcpyHostToDevice));

  // Inputs: one packed (B, S, G, H, D) tensor, or (GQA) q, k, v as three G = 1 tensors.
  const bool gqa = c.Hk >= 0;
  std::vector<Tensor5> ins, outs;
  const int order_row[5] = {0, 1, 2, 3, 4};
  const int order_grad[5] = {0, 3, 2, 1, 4};
  if (!gqa) {
    const int64_t shp[5] = {c.B, c.S, c.groups, c.H, c.D};
    ins.push_back(make5(c.dtype, shp, c.grad_layout ? order_grad : order_row, c.pad_d, c.offset));
    if (!c.in_place) outs.push_back(make5(c.dtype, shp, order_row));
  } else {
    const int64_t hs[3] = {c.H, c.Hk, c.Hk};
    for (int i = 0; i < 3; ++i) {
      const int64_t shp[5] = {c.B, c.S, 1, hs[i], c.D};
      ins.push_back(make5(c.dtype, shp, order_row, c.pad_d, c.offset));
      if (!c.in_place) outs.push_back(make5(c.dtype, shp, order_row));
    }
  }
  for (auto& t : ins) {
    fill_random(t, rng);
    t.upload();
  }
  for (auto& t : outs) t.upload();  // all poison

  RotaryArgs a;
  auto in_ref = [&](int g) { return gqa ? ins[g].slice(0) : ins[0].slice(g); };
  auto out_ref = [&](int g) {
    if (c.in_place) return in_ref(g);
    return gqa ? outs[g].slice(0) : outs[0].slice(g);
  };
  a.q = in_ref(0);
  a.q_out = out_ref(0);
  if (gqa || c.groups == 3) {
    a.k = in_ref(1);
    a.k_out = out_ref(1);
    a.v = in_ref(2);
    a.v_out = out_ref(2);
  }
  a.cos = TensorRef::matrix(cos_d.get(), DType::kFloat32, S_ro, c.half, 0, cw);
  a.sin = TensorRef::matrix(sin_d.get(), DType::kFloat32, S_ro, c.half, 0, cw);
  a.seqlen_offset = c.seqlen_offset;
  a.conjugate = c.conjugate;
  a.interleaved = c.interleaved;
  EXPECT_EQ(detail::rotary_vector_path(a), c.expect_vec);

  // The reference from the uploaded inputs (before an in-place call overwrites them).
  const int ngroups = (gqa || c.groups == 3) ? 3 : 1;
  std::vector<std::vector<double>> ref(ngroups);
  std::vector<int64_t> heads(ngroups);
  for (int g = 0; g < ngroups; ++g) {
    const Tensor5& t = gqa ? ins[g] : ins[0];
    const int64_t gi = gqa ? 0 : g;
    const int64_t H = gqa ? t.shape[3] : c.H;
    heads[g] = H;
    ref[g].resize(static_cast<size_t>(c.B * c.S * H * c.D));
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t s = 0; s < c.S; ++s)
        for (int64_t h = 0; h < H; ++h) {
          double* r = &ref[g][static_cast<size_t>(((b * c.S + s) * H + h) * c.D)];
          const int64_t p = s + c.seqlen_offset;
          for (int64_t d = 0; d < c.D; ++d) {
            const double x = t.get(t.at(b, s, gi, h, d));
            if (g == 2 || d >= 2 * c.half) {
              r[d] = x;
              continue;
            }
            r[d] = ref_rotated(
                d, c.half, c.interleaved,
                [&](int64_t col) { return t.get(t.at(b, s, gi, h, col)); },
                [&](int64_t j, double* cs, double* sn) {
                  *cs = cos_h[static_cast<size_t>(p * cw + j)];
                  *sn = (c.conjugate ? -1.0 : 1.0) * sin_h[static_cast<size_t>(p * cw + j)];
                });
          }
        }
  }

  ASSERT_NO_THROW(apply_rotary(a, nullptr));
  QUACK_CUDA_OK(cudaDeviceSynchronize());

  std::vector<Tensor5>& res = c.in_place ? ins : outs;
  std::vector<unsigned char> written;
  for (auto& t : res) t.download();
  for (int g = 0; g < ngroups; ++g) {
    const Tensor5& t = gqa ? res[g] : res[0];
    const int64_t gi = gqa ? 0 : g;
    std::vector<double> got(ref[g].size());
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t s = 0; s < c.S; ++s)
        for (int64_t h = 0; h < heads[g]; ++h)
          for (int64_t d = 0; d < c.D; ++d)
            got[static_cast<size_t>(((b * c.S + s) * heads[g] + h) * c.D + d)] =
                t.get(t.at(b, s, gi, h, d));
    const char* names[3] = {"q_out", "k_out", "v_out"};
    // v and the pass-through columns are copies: exact.
    EXPECT_TRUE(close(c.name + " " + names[g], got, ref[g], g == 2 ? 0.0 : tolerance(c.dtype),
                      c.D));
  }
  // Nothing written outside the outputs' elements (out of place: the buffers were all NaN).
  if (!c.in_place) {
    for (const auto& t : outs) {
      std::vector<char> mine(t.host.size(), 0);
      const int es = dtype_size(t.dtype);
      for (int64_t b = 0; b < t.shape[0]; ++b)
        for (int64_t s = 0; s < t.shape[1]; ++s)
          for (int64_t g = 0; g < t.shape[2]; ++g)
            for (int64_t h = 0; h < t.shape[3]; ++h)
              for (int64_t d = 0; d < t.shape[4]; ++d)
                std::memset(mine.data() + t.at(b, s, g, h, d) * es, 1, es);
      int64_t stray = 0;
      for (size_t k = 0; k < mine.size(); ++k) stray += !mine[k] && t.host[k] != 0xFF;
      EXPECT_EQ(stray, 0) << c.name << ": bytes written outside the output";
    }
  }
}

const DType kBf = DType::kBFloat16, kF16 = DType::kFloat16, kF32 = DType::kFloat32;

// name, dtype, B, S, H, D, half, then the options in Case's order.
Case mk(std::string name, DType t, int64_t B, int64_t S, int64_t H, int64_t D, int64_t half) {
  Case c;
  c.name = std::move(name);
  c.dtype = t;
  c.B = B, c.S = S, c.H = H, c.D = D, c.half = half;
  return c;
}

std::vector<Case> cases() {
  std::vector<Case> v;
  v.push_back(mk("qkv_bf16_D128", kBf, 2, 7, 3, 128, 64));
  {
    Case c = mk("qkv_bf16_demo_cos_view", kBf, 1, 64, 16, 128, 64);
    c.cs_pad = 64;  // the demo's cos[:, :hd / 2] of its (T, hd) table
    v.push_back(c);
  }
  {
    Case c = mk("qkv_bf16_grad_layout", kBf, 2, 9, 4, 128, 64);
    c.grad_layout = true;
    c.conjugate = true;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_f16_rotary_dim_32_of_64_offset", kF16, 1, 33, 4, 64, 16);
    c.seqlen_offset = 5;
    c.conjugate = true;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_f32_D64", kF32, 2, 5, 2, 64, 32);
    v.push_back(c);
  }
  {
    Case c = mk("q_f32_in_place", kF32, 3, 5, 2, 128, 64);
    c.groups = 1;
    c.in_place = true;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_bf16_in_place_rotary_dim_64_of_128", kBf, 2, 3, 4, 128, 32);
    c.in_place = true;
    v.push_back(c);
  }
  {
    Case c = mk("gqa_bf16_8q_2kv", kBf, 2, 11, 8, 128, 64);
    c.Hk = 2;
    v.push_back(c);
  }
  {
    Case c = mk("gqa_f16_padded_heads", kF16, 1, 6, 4, 64, 32);
    c.Hk = 1;
    c.pad_d = 8;  // head stride 72
    v.push_back(c);
  }
  {
    Case c = mk("qkv_bf16_D40_scalar", kBf, 1, 9, 3, 40, 20);  // half 20: not a multiple of 8
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_f16_D6_scalar", kF16, 2, 3, 5, 6, 3);
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_bf16_misaligned_scalar", kBf, 1, 5, 2, 128, 64);
    c.offset = 1;
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    Case c = mk("q_f32_odd_head_stride_scalar", kF32, 2, 3, 3, 64, 32);
    c.groups = 1;
    c.pad_d = 1;  // head stride 65
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    Case c = mk("q_bf16_grid_stride_1200000_tokens", kBf, 2, 600000, 1, 16, 8);
    c.groups = 1;
    v.push_back(c);
  }
  // The interleaved layout: the vector kernel (each dtype), rotary_dim < D with an offset and
  // the inverse, in place, and the element-at-a-time kernel (odd half, misaligned).
  for (const Case& base : {mk("qkv_bf16_D128_il", kBf, 2, 7, 3, 128, 64),
                           mk("qkv_f16_D64_il", kF16, 1, 9, 2, 64, 32),
                           mk("qkv_f32_D64_il", kF32, 2, 5, 2, 64, 32)}) {
    Case c = base;
    c.interleaved = true;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_bf16_rotary_dim_64_of_128_offset_conj_il", kBf, 2, 9, 4, 128, 32);
    c.interleaved = true;
    c.seqlen_offset = 5;
    c.conjugate = true;
    c.cs_pad = 32;
    v.push_back(c);
  }
  {
    Case c = mk("q_bf16_in_place_il", kBf, 2, 5, 3, 128, 64);
    c.groups = 1;
    c.in_place = true;
    c.interleaved = true;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_f16_D6_scalar_il", kF16, 2, 3, 5, 6, 3);
    c.interleaved = true;
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    Case c = mk("qkv_bf16_misaligned_scalar_il", kBf, 1, 5, 2, 128, 48);
    c.interleaved = true;
    c.offset = 1;
    c.expect_vec = false;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Rotary, RotaryCases, ::testing::ValuesIn(cases()), case_name);

class RotaryEmpty : public GpuTest {};

TEST_F(RotaryEmpty, LaunchesNothing) {
  DeviceBuffer cs(64 * 4), x(4 * 64 * 2), out(4 * 64 * 2);
  out.poison();
  const int64_t shapes[3][4] = {{0, 4, 2, 64}, {2, 0, 2, 64}, {2, 4, 0, 64}};
  for (const auto& shp : shapes) {
    RotaryArgs a;
    a.q.data = x.get();
    a.q.dtype = DType::kBFloat16;
    a.q.ndim = 4;
    for (int i = 0; i < 4; ++i) a.q.shape[i] = shp[i];
    a.q.stride[3] = 1, a.q.stride[2] = 64, a.q.stride[1] = 64 * shp[2],
    a.q.stride[0] = 64 * shp[2] * shp[1];
    a.q_out = a.q;
    a.q_out.data = out.get();
    a.cos = TensorRef::matrix(cs.get(), DType::kFloat32, 8, 8);
    a.sin = a.cos;
    EXPECT_NO_THROW(apply_rotary(a, nullptr));
  }
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  std::vector<unsigned char> img(out.bytes());
  QUACK_CUDA_OK(cudaMemcpy(img.data(), out.get(), img.size(), cudaMemcpyDeviceToHost));
  for (unsigned char b : img) ASSERT_EQ(b, 0xFF);
}

// rotary_qkv_pack cases: which gradients are given ("qkv", "k", "" ...), and their layout.
struct PackCase {
  std::string name;
  DType dtype;
  int64_t B, S, H, D, half;
  std::string given = "qkv";
  bool grad_layout = false;  // dq, dk, dv with SDPA's (B, H, S, D) memory order
  int64_t seqlen_offset = 0;
  bool expect_vec = true;
  bool interleaved = false;
};

std::string pack_name(const ::testing::TestParamInfo<PackCase>& info) { return info.param.name; }

class RotaryPack : public GpuTest, public ::testing::WithParamInterface<PackCase> {};

TEST_P(RotaryPack, MatchesReference) {
  const PackCase c = GetParam();
  Rng rng(4321 + c.B * 7 + c.S * 13 + c.D);
  const int64_t S_ro = c.S + c.seqlen_offset + 2;
  std::vector<float> cos_h(static_cast<size_t>(S_ro * c.half)), sin_h(cos_h.size());
  for (int64_t p = 0; p < S_ro; ++p)
    for (int64_t j = 0; j < c.half; ++j) {
      const double ang = static_cast<double>(p) *
                         std::pow(10000.0, -static_cast<double>(j) / static_cast<double>(c.half));
      cos_h[static_cast<size_t>(p * c.half + j)] = static_cast<float>(std::cos(ang));
      sin_h[static_cast<size_t>(p * c.half + j)] = static_cast<float>(std::sin(ang));
    }
  DeviceBuffer cos_d(cos_h.size() * 4), sin_d(sin_h.size() * 4);
  QUACK_CUDA_OK(cudaMemcpy(cos_d.get(), cos_h.data(), cos_h.size() * 4, cudaMemcpyHostToDevice));
  QUACK_CUDA_OK(cudaMemcpy(sin_d.get(), sin_h.data(), sin_h.size() * 4, cudaMemcpyHostToDevice));

  const int order_row[5] = {0, 1, 2, 3, 4};
  const int order_bhsd[5] = {0, 3, 2, 1, 4};  // (B, H, 1, S, D) memory: SDPA's gradients
  const int64_t gshape[5] = {c.B, c.S, 1, c.H, c.D};
  const int64_t pshape[5] = {c.B, c.S, 3, c.H, c.D};
  std::vector<Tensor5> grads;
  for (int g = 0; g < 3; ++g) {
    grads.push_back(make5(c.dtype, gshape, c.grad_layout ? order_bhsd : order_row));
    fill_random(grads[g], rng);
    grads[g].upload();
  }
  Tensor5 out = make5(c.dtype, pshape, order_row);
  out.upload();  // all poison

  RotaryPackArgs a;
  TensorRef* slots[3] = {&a.dq, &a.dk, &a.dv};
  const char* letters = "qkv";
  for (int g = 0; g < 3; ++g)
    if (c.given.find(letters[g]) != std::string::npos) *slots[g] = grads[g].slice(0);
  a.dqkv = out.slice(0);  // (B, S, H, D) at group 0, widened to the merged (B, S, 3·H, D)
  a.dqkv.shape[2] = 3 * c.H;
  a.dqkv.stride[2] = c.D;
  a.cos = TensorRef::matrix(cos_d.get(), DType::kFloat32, S_ro, c.half);
  a.sin = TensorRef::matrix(sin_d.get(), DType::kFloat32, S_ro, c.half);
  a.seqlen_offset = c.seqlen_offset;
  a.conjugate = true;
  a.interleaved = c.interleaved;
  EXPECT_EQ(detail::rotary_pack_vector_path(a), c.expect_vec);
  ASSERT_NO_THROW(rotary_qkv_pack(a, nullptr));
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  out.download();

  const char* names[3] = {"dqkv[:, :, 0]", "dqkv[:, :, 1]", "dqkv[:, :, 2]"};
  for (int g = 0; g < 3; ++g) {
    const bool present = slots[g]->present();
    const Tensor5& t = grads[g];
    std::vector<double> ref(static_cast<size_t>(c.B * c.S * c.H * c.D)), got(ref.size());
    for (int64_t b = 0; b < c.B; ++b)
      for (int64_t s = 0; s < c.S; ++s)
        for (int64_t h = 0; h < c.H; ++h) {
          const size_t row = static_cast<size_t>(((b * c.S + s) * c.H + h) * c.D);
          const int64_t p = s + c.seqlen_offset;
          for (int64_t d = 0; d < c.D; ++d) {
            got[row + d] = out.get(out.at(b, s, g, h, d));
            if (!present) {
              ref[row + d] = 0.0;
            } else if (g == 2 || d >= 2 * c.half) {
              ref[row + d] = t.get(t.at(b, s, 0, h, d));
            } else {
              ref[row + d] = ref_rotated(
                  d, c.half, c.interleaved,
                  [&](int64_t col) { return t.get(t.at(b, s, 0, h, col)); },
                  [&](int64_t j, double* cs, double* sn) {
                    *cs = cos_h[static_cast<size_t>(p * c.half + j)];
                    *sn = -sin_h[static_cast<size_t>(p * c.half + j)];  // conjugate
                  });
            }
          }
        }
    // Absent: exact zeros; dv: an exact copy.
    EXPECT_TRUE(close(c.name + " " + names[g], got, ref,
                      (!present || g == 2) ? 0.0 : tolerance(c.dtype), c.D));
  }
}

PackCase pk(std::string name, DType t, int64_t B, int64_t S, int64_t H, int64_t D, int64_t half,
            std::string given) {
  PackCase c;
  c.name = std::move(name);
  c.dtype = t;
  c.B = B, c.S = S, c.H = H, c.D = D, c.half = half;
  c.given = std::move(given);
  return c;
}

std::vector<PackCase> pack_cases() {
  std::vector<PackCase> v;
  v.push_back(pk("bf16_all", kBf, 2, 9, 4, 128, 64, "qkv"));
  {
    PackCase c = pk("bf16_all_sdpa_layout", kBf, 2, 9, 4, 128, 64, "qkv");
    c.grad_layout = true;
    v.push_back(c);
  }
  v.push_back(pk("bf16_k_only", kBf, 1, 17, 3, 128, 64, "k"));
  v.push_back(pk("bf16_q_and_v", kBf, 1, 5, 2, 64, 32, "qv"));
  v.push_back(pk("f16_none", kF16, 2, 4, 2, 64, 32, ""));
  {
    PackCase c = pk("f32_rotary_dim_32_of_64_offset", kF32, 2, 6, 3, 64, 16, "qkv");
    c.seqlen_offset = 3;
    v.push_back(c);
  }
  {
    PackCase c = pk("bf16_D40_scalar_kv", kBf, 1, 7, 3, 40, 20, "kv");
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    PackCase c = pk("f16_D6_scalar_q", kF16, 2, 3, 5, 6, 3, "q");
    c.expect_vec = false;
    v.push_back(c);
  }
  {
    PackCase c = pk("bf16_all_sdpa_layout_il", kBf, 2, 9, 4, 128, 64, "qkv");
    c.grad_layout = true;
    c.interleaved = true;
    v.push_back(c);
  }
  {
    PackCase c = pk("f32_rotary_dim_32_of_64_offset_kv_il", kF32, 2, 6, 3, 64, 16, "kv");
    c.seqlen_offset = 3;
    c.interleaved = true;
    v.push_back(c);
  }
  {
    PackCase c = pk("f16_D6_scalar_q_il", kF16, 2, 3, 5, 6, 3, "q");
    c.expect_vec = false;
    c.interleaved = true;
    v.push_back(c);
  }
  return v;
}

INSTANTIATE_TEST_SUITE_P(Rotary, RotaryPack, ::testing::ValuesIn(pack_cases()), pack_name);

}  // namespace
}  // namespace quack::test
