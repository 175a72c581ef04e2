// Does the cache hint of a streaming kernel's global loads and stores change its rate after the
// L2 is left full of dirty lines (what triton's do_bench does before each call: it zeroes a
// 256 MB buffer)? The row kernels load with ld.global.cs (__ldcs) and store with st.global.cs
// (__stcs); QuACK's CuTe-DSL kernels use plain ld / st. docs/status.md, the in-process gap.
// Copy (16 B vectors, 4 in flight a thread) and read-only (sum) kernels, each load hint x store
// hint, timed three ways: back to back, after a 256 MB cudaMemset (dirty L2), after a 256 MB
// read (clean L2). Run on the device:
//   nvcc -O3 -arch=sm_90a -o /tmp/cache_hints scripts/diag_cache_hints.cu && /tmp/cache_hints
#include <algorithm>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

enum { kPlain = 0, kCs = 1, kNc = 2, kLu = 3 };
static const char* kLoadName[] = {"ld", "ld.cs", "ld.nc", "ld.lu"};
static const char* kStoreName[] = {"st", "st.cs"};

template <int L>
__device__ __forceinline__ uint4 load16(const uint4* p) {
  if constexpr (L == kCs) return __ldcs(p);
  else if constexpr (L == kNc) return __ldg(p);
  else if constexpr (L == kLu) return __ldlu(p);
  else return *p;
}
template <int S>
__device__ __forceinline__ void store16(uint4* p, uint4 v) {
  if constexpr (S == 1) __stcs(p, v);
  else *p = v;
}

// Each thread: 4 vectors of a 4-vector group in flight, grid-stride over groups.
template <int L, int S>
__global__ void __launch_bounds__(256) copy_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, size_t n) {
  size_t stride = size_t(gridDim.x) * blockDim.x * 4;
  for (size_t i = (size_t(blockIdx.x) * blockDim.x * 4) + threadIdx.x; i < n; i += stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = load16<L>(x + i + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < 4; ++u) store16<S>(y + i + u * blockDim.x, v[u]);
  }
}
template <int L>
__global__ void __launch_bounds__(256) sum_kernel(const uint4* __restrict__ x, unsigned* out, size_t n) {
  size_t stride = size_t(gridDim.x) * blockDim.x * 4;
  unsigned acc = 0;
  for (size_t i = (size_t(blockIdx.x) * blockDim.x * 4) + threadIdx.x; i < n; i += stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = load16<L>(x + i + u * blockDim.x);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;  // keeps the loads; never true for the fill below
}
__global__ void read_kernel(const uint4* __restrict__ x, unsigned* out, size_t n) {
  unsigned acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) acc ^= x[i].x;
  if (acc == 0x12345678u) out[0] = acc;
}

using Launch = void (*)(const uint4*, uint4*, unsigned*, size_t, int);
template <int L, int S> void launch_copy(const uint4* x, uint4* y, unsigned*, size_t n, int grid) { copy_kernel<L, S><<<grid, 256>>>(x, y, n); }
template <int L> void launch_sum(const uint4* x, uint4*, unsigned* o, size_t n, int grid) { sum_kernel<L><<<grid, 256>>>(x, o, n); }

int main() {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t flush_bytes = size_t(256) << 20;
  const size_t max_bytes = size_t(2) << 30;
  uint4 *x, *y, *flush; unsigned* o;
  cudaMalloc(&x, max_bytes); cudaMalloc(&y, max_bytes); cudaMalloc(&flush, flush_bytes); cudaMalloc(&o, 4);
  cudaMemset(x, 0x3c, max_bytes); cudaMemset(y, 0, max_bytes);
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  struct V { const char* kind; int l, s; Launch f; };
  std::vector<V> vs = {
      {"copy", kPlain, 0, launch_copy<kPlain, 0>}, {"copy", kPlain, 1, launch_copy<kPlain, 1>},
      {"copy", kCs, 0, launch_copy<kCs, 0>},       {"copy", kCs, 1, launch_copy<kCs, 1>},
      {"copy", kNc, 0, launch_copy<kNc, 0>},       {"copy", kNc, 1, launch_copy<kNc, 1>},
      {"copy", kLu, 1, launch_copy<kLu, 1>},
      {"sum", kPlain, -1, launch_sum<kPlain>},      {"sum", kCs, -1, launch_sum<kCs>},
      {"sum", kNc, -1, launch_sum<kNc>}};
  const size_t sizes[] = {size_t(128) << 20, size_t(512) << 20, size_t(2) << 30};
  printf("bytes read (MB) | kernel | load | store | b2b GB/s | after dirty flush | after clean flush  (GB/s: bytes read + written / median time)\n");
  for (int round = 0; round < 2; ++round)
    for (size_t bytes : sizes)
      for (int vi = 0; vi < (int)vs.size(); ++vi) {
        const V& v = vs[round ? vs.size() - 1 - vi : vi];  // the order reversed in round 2
        size_t n = bytes / 16;
        int grid = sms * 8;
        double gbs[3];
        for (int c = 0; c < 3; ++c) {
          std::vector<float> ms;
          for (int it = 0; it < 25; ++it) {
            if (c == 1) cudaMemsetAsync(flush, it, flush_bytes);
            if (c == 2) read_kernel<<<sms * 8, 256>>>(flush, o, flush_bytes / 16);
            cudaEventRecord(e0); v.f(x, y, o, n, grid); cudaEventRecord(e1); cudaEventSynchronize(e1);
            float t; cudaEventElapsedTime(&t, e0, e1); if (it >= 3) ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          double moved = double(bytes) * (v.s >= 0 ? 2 : 1);
          gbs[c] = moved / (ms[ms.size() / 2] * 1e-3) / 1e9;
        }
        printf("%5zu | %-4s | %-5s | %-5s | %7.0f | %7.0f | %7.0f\n", bytes >> 20, v.kind, kLoadName[v.l],
               v.s >= 0 ? kStoreName[v.s] : "-", gbs[0], gbs[1], gbs[2]);
      }
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", e ? cudaGetErrorString(e) : "ok");
  return e != cudaSuccess;
}
