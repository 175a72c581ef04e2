// A gated MLP and an LM head with cross-entropy from plain C++, each step checked against a
// float64 reference on the host:
//   h      = swiglu(x · W1ᵀ)          gemm_gated: W1's rows interleave gate and up (M, H) bf16
//   logits = h · W2ᵀ                  gemm (M, V) bf16
//   loss   = mean cross-entropy(logits, target), lse, dx = ∂loss/∂logits   cross_entropy_fwd
// with some targets at ignore_index. It shows the protocol of every op: fill an Arguments
// struct of TensorRefs (pointers, shapes, strides in elements), optionally can_implement
// (validation, no device work), then the launch on a stream; bad input throws
// quack::InvalidArgument naming the function, the argument, the expected and the actual value.
// Exit codes: 0 ok, 1 wrong result or error, 3 no CUDA device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include <quack/quack.h>

namespace {

using bf16 = __nv_bfloat16;
constexpr int M = 256, D = 192, H = 256, V = 1024;  // tokens, model dim, hidden, vocabulary
constexpr int64_t kIgnore = -100;

std::vector<bf16> random_bf16(size_t n, float scale, std::mt19937& g) {
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<bf16> v(n);
  for (auto& e : v) e = __float2bfloat16(u(g));
  return v;
}

double f(bf16 v) { return static_cast<double>(__bfloat162float(v)); }

// A CUDA runtime call that must succeed, else the example stops (main catches it).
void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device buffers freed when main returns, early returns included.
struct DeviceBuffers {
  std::vector<void*> ptrs;
  void* alloc(size_t bytes) {
    void* p = nullptr;
    check(cudaMalloc(&p, bytes), "cudaMalloc");
    ptrs.push_back(p);
    return p;
  }
  ~DeviceBuffers() {
    for (void* p : ptrs) cudaFree(p);
  }
};

// Uploads on `s`: ordered before the kernels on `s` whatever the default stream's mode.
template <class T>
T* to_device(DeviceBuffers& buf, const std::vector<T>& h, cudaStream_t s) {
  void* p = buf.alloc(h.size() * sizeof(T));
  check(cudaMemcpyAsync(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice, s), "upload");
  return static_cast<T*>(p);
}

template <class T>
std::vector<T> to_host(const void* p, size_t n) {
  std::vector<T> h(n);
  check(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), "download");
  return h;
}

// max |got − want| / (max |want| + tiny): one number per step, bf16 rounding ≤ 2^-8 ≈ 3.9e-3.
struct Err {
  double diff = 0, ref = 0;
  void add(double got, double want) {
    diff = std::fmax(diff, std::fabs(got - want));
    ref = std::fmax(ref, std::fabs(want));
  }
  double rel() const { return diff / (ref + 1e-30); }
};

bool report(const char* what, const Err& e, double tol) {
  std::printf("  %-28s max rel err %.2e (tolerance %.0e)\n", what, e.rel(), tol);
  return e.rel() <= tol;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("mlp_ce_example: no CUDA device, nothing to run\n");
    return 3;
  }
  // Scales that give h and the logits an O(1) spread (a softmax far from flat, so that dx's
  // non-target entries are checked for what they are, not lost under the target's).
  std::mt19937 gen(7);
  const auto hx = random_bf16(size_t{M} * D, 1.f, gen);
  const auto hw1 = random_bf16(size_t{2} * H * D, 3.f / std::sqrt(float(D)), gen);  // (2H, D)
  const auto hw2 = random_bf16(size_t{V} * H, 3.f / std::sqrt(float(H)), gen);      // (V, H)
  std::vector<int64_t> ht(M);
  for (int i = 0; i < M; ++i) ht[i] = i % 17 == 0 ? kIgnore : int64_t(gen() % V);

  using quack::DType;
  using quack::TensorRef;
  DeviceBuffers buf;
  cudaStream_t s = nullptr;
  std::vector<bf16> gh, gl, gdx;
  std::vector<float> glse;
  float gloss = 0;
  try {
    check(cudaStreamCreate(&s), "cudaStreamCreate");
    const bf16* x = to_device(buf, hx, s);
    const bf16* w1 = to_device(buf, hw1, s);
    const bf16* w2 = to_device(buf, hw2, s);
    const int64_t* target = to_device(buf, ht, s);
    void* h = buf.alloc(size_t{M} * H * sizeof(bf16));
    void* logits = buf.alloc(size_t{M} * V * sizeof(bf16));
    void* dx = buf.alloc(size_t{M} * V * sizeof(bf16));
    void* loss = buf.alloc(sizeof(float));
    void* lse = buf.alloc(size_t{M} * sizeof(float));

    // 1. h = swiglu(x · W1ᵀ). b = W1ᵀ: (D, 2H) column-major, strides (1, D); preact not stored.
    quack::GemmGatedArgs g1;
    g1.a = TensorRef::matrix(x, DType::kBFloat16, M, D);
    g1.b = TensorRef::matrix(w1, DType::kBFloat16, D, 2 * H, /*dev=*/0, /*row_stride=*/1,
                             /*col_stride=*/D);
    g1.postact = TensorRef::matrix(h, DType::kBFloat16, M, H);
    g1.activation = quack::Activation::kSwiglu;
    // 2. logits = h · W2ᵀ. b = W2ᵀ: (H, V) column-major, strides (1, H). (Row-major strides
    // would also be accepted, as a (H, V) matrix of other values: the strides say which.)
    quack::GemmArgs g2;
    g2.a = TensorRef::matrix(h, DType::kBFloat16, M, H);
    g2.b = TensorRef::matrix(w2, DType::kBFloat16, H, V, /*dev=*/0, /*row_stride=*/1,
                             /*col_stride=*/H);
    g2.d = TensorRef::matrix(logits, DType::kBFloat16, M, V);
    // 3. mean cross-entropy over the targets that are not ignore_index, lse and dx.
    quack::CrossEntropyFwdArgs ce;
    ce.x = TensorRef::matrix(logits, DType::kBFloat16, M, V);
    ce.target = TensorRef::vector(target, DType::kInt64, M);
    ce.loss = TensorRef::vector(loss, DType::kFloat32, 1);
    ce.lse = TensorRef::vector(lse, DType::kFloat32, M);
    ce.dx = TensorRef::matrix(dx, DType::kBFloat16, M, V);
    ce.ignore_index = kIgnore;
    ce.reduction = quack::Reduction::kMean;
    ce.workspace_bytes = quack::cross_entropy_fwd_workspace_size(ce);
    ce.workspace = buf.alloc(ce.workspace_bytes);

    // A mistake caught before any launch: b with the wrong K.
    quack::GemmArgs bad = g2;
    bad.b = TensorRef::matrix(w2, DType::kBFloat16, H / 2, V, 0, 1, H / 2);
    try {
      quack::can_implement(bad);
      std::printf("mlp_ce_example: a wrong K was accepted\n");
      return 1;
    } catch (const quack::InvalidArgument& e) {
      std::printf("rejected as expected: %s\n", e.what());
    }
    quack::gemm_gated(g1, s);
    quack::gemm(g2, s);
    quack::cross_entropy_fwd(ce, s);
    check(cudaStreamSynchronize(s), "the kernels");
    gh = to_host<bf16>(h, size_t{M} * H);
    gl = to_host<bf16>(logits, size_t{M} * V);
    gdx = to_host<bf16>(dx, size_t{M} * V);
    glse = to_host<float>(lse, M);
    gloss = to_host<float>(loss, 1)[0];
    cudaStreamDestroy(s);
  } catch (const std::exception& e) {
    std::printf("mlp_ce_example: %s\n", e.what());
    return 1;
  }

  // References in float64, each step from the device's own bf16 inputs to that step.
  Err eh, el, es;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < H; ++j) {
      double gate = 0, up = 0;  // W1's rows 2j (gate) and 2j + 1 (up)
      for (int k = 0; k < D; ++k) {
        gate += f(hx[size_t(i) * D + k]) * f(hw1[size_t(2 * j) * D + k]);
        up += f(hx[size_t(i) * D + k]) * f(hw1[size_t(2 * j + 1) * D + k]);
      }
      eh.add(f(gh[size_t(i) * H + j]), gate / (1 + std::exp(-gate)) * up);
    }
  double loss_sum = 0;
  int counted = 0;
  for (int i = 0; i < M; ++i) {
    std::vector<double> row(V);
    double mx = -INFINITY;
    for (int v = 0; v < V; ++v) {
      double acc = 0;
      for (int k = 0; k < H; ++k) acc += f(gh[size_t(i) * H + k]) * f(hw2[size_t(v) * H + k]);
      el.add(f(gl[size_t(i) * V + v]), acc);
      row[v] = f(gl[size_t(i) * V + v]);  // the CE reference reads the device's logits
      mx = std::fmax(mx, row[v]);
    }
    double se = 0;
    for (double r : row) se += std::exp(r - mx);
    const double l = mx + std::log(se);
    es.add(glse[i], l);
    if (ht[i] != kIgnore) {
      loss_sum += l - row[ht[i]];
      ++counted;
    }
  }
  const double want_loss = loss_sum / counted;
  // dx element by element: within one bf16 ulp of its value (2^-7 ≈ 7.8e-3 relative; rounding to
  // nearest is within half of it) and fp32's math, and exactly 0 on the ignored rows.
  int dx_bad = 0;
  for (int i = 0; i < M; ++i)
    for (int v = 0; v < V; ++v) {
      const double got = f(gdx[size_t(i) * V + v]);
      if (ht[i] == kIgnore) {
        dx_bad += got != 0.0;
        continue;
      }
      const double p = std::exp(f(gl[size_t(i) * V + v]) - glse[i]);
      const double want = (p - (v == ht[i])) / counted;
      dx_bad += !(std::fabs(got - want) <= 8e-3 * std::fabs(want) + 1e-12);
    }
  std::printf("quack %s: %d of %d tokens counted\n", quack::version(), counted, M);
  bool ok = report("h = swiglu(x W1^T)", eh, 2e-2);
  ok = report("logits = h W2^T", el, 2e-2) && ok;
  ok = report("lse", es, 1e-5) && ok;
  Err eloss;
  eloss.add(gloss, want_loss);
  ok = report("loss (mean)", eloss, 1e-5) && ok;
  std::printf("  %-28s %d of %d elements off (each within 8e-3 relative; ignored rows 0)\n",
              "dx", dx_bad, M * V);
  ok = dx_bad == 0 && ok;
  std::printf("%s\n", ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
