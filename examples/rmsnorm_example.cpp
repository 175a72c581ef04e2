// RMSNorm from plain C++: y = x / sqrt(mean(x^2) + eps) * w on a (4, 4096) bf16 matrix.
// Exit codes: 0 ok, 1 wrong result or error, 3 no CUDA device.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include <quack/quack.h>

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("rmsnorm_example: no CUDA device, nothing to run\n");
    return 3;
  }
  const int M = 4, N = 4096;
  std::vector<__nv_bfloat16> hx(M * N);
  std::vector<float> hw(N, 2.0f);
  for (int i = 0; i < M * N; ++i) hx[i] = __float2bfloat16(std::sin(0.1f * i));
  void *x, *y, *w;
  cudaMalloc(&x, M * N * 2);
  cudaMalloc(&y, M * N * 2);
  cudaMalloc(&w, N * 4);
  cudaMemcpy(x, hx.data(), M * N * 2, cudaMemcpyHostToDevice);
  cudaMemcpy(w, hw.data(), N * 4, cudaMemcpyHostToDevice);

  quack::RmsNormFwdArgs args;
  args.x = quack::TensorRef::matrix(x, quack::DType::kBFloat16, M, N);
  args.weight = quack::TensorRef::vector(w, quack::DType::kFloat32, N);
  args.out = quack::TensorRef::matrix(y, quack::DType::kBFloat16, M, N);
  args.eps = 1e-6f;
  try {
    quack::rmsnorm_fwd(args, /*stream=*/nullptr);
  } catch (const std::exception& e) {
    std::printf("rmsnorm_example: %s\n", e.what());
    return 1;
  }
  std::vector<__nv_bfloat16> hy(M * N);
  cudaMemcpy(hy.data(), y, M * N * 2, cudaMemcpyDeviceToHost);
  double ss = 0;
  for (int j = 0; j < N; ++j) ss += std::pow(__bfloat162float(hx[j]), 2);
  const double ref = __bfloat162float(hx[1]) / std::sqrt(ss / N + 1e-6) * 2.0;
  std::printf("quack %s: y[0,1] = %.4f (reference %.4f)\n", quack::version(),
              __bfloat162float(hy[1]), ref);
  return std::fabs(__bfloat162float(hy[1]) - ref) < 1e-2 * std::fabs(ref) + 1e-3 ? 0 : 1;
}
