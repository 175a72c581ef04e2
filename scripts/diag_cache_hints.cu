// Does the cache hint of a streaming kernel's global loads and stores change its rate after the
// L2 is left full of dirty lines (what triton's do_bench does before each call: it zeroes a
// 256 MB buffer)? Run AK3 / AK4 (docs/performance.md, "The runs cited"): ld.global.cs and
// ld.global.L1::no_allocate lose 4.5-5.5 % there, ld.global.nc does not (AK's "ld" compiled to
// ld.global.nc too: a const __restrict__ dereference; here it is a plain ld.global). This version adds
// an L2 evict_normal policy beside L1::no_allocate and a row-scale kernel whose fp32 weight
// slice every row re-reads through L1 (RMSNorm's pattern: plain row loads cost it 5.5 % at 32768
// columns in AK3), to find a load that is plain in L2 and leaves L1 to the weights.
// Kernels: copy and sum (16 B vectors, 4 in flight a thread, grid-stride), scale (rows of N
// bf16, 1024 threads a row, y = x · w with w fp32 read by __ldg), each load hint x store hint,
// timed back to back, after a 256 MB cudaMemset (dirty L2) and after a 256 MB read (clean L2).
// Run on the device:
//   nvcc -O3 -arch=sm_90a -o /tmp/cache_hints scripts/diag_cache_hints.cu && /tmp/cache_hints
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <vector>
#include <cuda_runtime.h>

enum { kPlain = 0, kCs = 1, kNc = 2, kNa = 3, kNaNormal = 4, kL1First = 5 };
static const char* kLoadName[] = {"ld", "ld.cs", "ld.nc", "ld.na", "ld.na+L2n", "ld.L1ef"};
static const char* kStoreName[] = {"st", "st.cs"};

template <int L>
__device__ __forceinline__ uint4 load16(const uint4* p, uint64_t pol) {
  uint4 v;
  if constexpr (L == kCs) return __ldcs(p);
  else if constexpr (L == kNc) return __ldg(p);
  else if constexpr (L == kNa) {
    asm volatile("ld.global.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
  } else if constexpr (L == kNaNormal) {
    asm volatile("ld.global.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(pol));
    return v;
  } else if constexpr (L == kL1First) {
    asm volatile("ld.global.L1::evict_first.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
  } else {  // plain ld.global (a dereference of a const __restrict__ pointer compiles to ld.global.nc)
    asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
    return v;
  }
}
__device__ __forceinline__ uint64_t l2_evict_normal() {
  uint64_t pol;
  asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
template <int S>
__device__ __forceinline__ void store16(uint4* p, uint4 v) {
  if constexpr (S == 1) __stcs(p, v);
  else *p = v;
}

template <int L, int S>
__global__ void __launch_bounds__(256) copy_kernel(const uint4* __restrict__ x, uint4* __restrict__ y, size_t n) {
  const uint64_t pol = l2_evict_normal();
  size_t stride = size_t(gridDim.x) * blockDim.x * 4;
  for (size_t i = (size_t(blockIdx.x) * blockDim.x * 4) + threadIdx.x; i < n; i += stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = load16<L>(x + i + u * blockDim.x, pol);
#pragma unroll
    for (int u = 0; u < 4; ++u) store16<S>(y + i + u * blockDim.x, v[u]);
  }
}
template <int L>
__global__ void __launch_bounds__(256) sum_kernel(const uint4* __restrict__ x, unsigned* out, size_t n) {
  const uint64_t pol = l2_evict_normal();
  size_t stride = size_t(gridDim.x) * blockDim.x * 4;
  unsigned acc = 0;
  for (size_t i = (size_t(blockIdx.x) * blockDim.x * 4) + threadIdx.x; i < n; i += stride) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; ++u) v[u] = load16<L>(x + i + u * blockDim.x, pol);
#pragma unroll
    for (int u = 0; u < 4; ++u) acc ^= v[u].x + v[u].y + v[u].z + v[u].w;
  }
  if (acc == 0x12345678u) out[0] = acc;  // keeps the loads; never true for the fill below
}
// Rows of kN bf16 (kN / 8 16-byte vectors), one CTA of 1024 threads a row at a time (grid-stride
// over rows); each vector's 8 values scaled by the fp32 weight (two float4 __ldg loads).
template <int L, int S, int kN>
__global__ void __launch_bounds__(1024) scale_kernel(const uint4* __restrict__ x, const float4* __restrict__ w,
                                                     uint4* __restrict__ y, int rows) {
  constexpr int kVecs = kN / 8 / 1024 > 0 ? kN / 8 / 1024 : 1;
  const uint64_t pol = l2_evict_normal();
  for (int r = blockIdx.x; r < rows; r += gridDim.x) {
    uint4 v[kVecs];
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      int c = j * 1024 + threadIdx.x;
      if (c < kN / 8) v[j] = load16<L>(x + size_t(r) * (kN / 8) + c, pol);
    }
#pragma unroll
    for (int j = 0; j < kVecs; ++j) {
      int c = j * 1024 + threadIdx.x;
      if (c >= kN / 8) continue;
      float4 w0 = __ldg(w + 2 * c), w1 = __ldg(w + 2 * c + 1);
      float wf[8] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
      uint32_t* u = &v[j].x;
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        float lo = __uint_as_float(u[k] << 16) * wf[2 * k], hi = __uint_as_float(u[k] & 0xffff0000u) * wf[2 * k + 1];
        u[k] = (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
      }
      store16<S>(y + size_t(r) * (kN / 8) + c, v[j]);
    }
  }
}
__global__ void read_kernel(const uint4* __restrict__ x, unsigned* out, size_t n) {
  unsigned acc = 0;
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) acc ^= x[i].x;
  if (acc == 0x12345678u) out[0] = acc;
}

struct Bufs { const uint4* x; uint4* y; const float4* w; unsigned* o; };
using Launch = void (*)(const Bufs&, size_t bytes, int sms);
template <int L, int S> void launch_copy(const Bufs& b, size_t bytes, int sms) { copy_kernel<L, S><<<sms * 8, 256>>>(b.x, b.y, bytes / 16); }
template <int L> void launch_sum(const Bufs& b, size_t bytes, int sms) { sum_kernel<L><<<sms * 8, 256>>>(b.x, b.o, bytes / 16); }
template <int L, int S, int kN> void launch_scale(const Bufs& b, size_t bytes, int sms) {
  scale_kernel<L, S, kN><<<sms * 2, 1024>>>(b.x, b.w, b.y, int(bytes / (kN * 2)));
}

int main() {
  int sms = 0; cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  const size_t flush_bytes = size_t(256) << 20, max_bytes = size_t(2) << 30;
  uint4 *x, *y, *flush; float4* w; unsigned* o;
  cudaMalloc(&x, max_bytes); cudaMalloc(&y, max_bytes); cudaMalloc(&flush, flush_bytes); cudaMalloc(&o, 4);
  cudaMalloc(&w, 65536 * 4);
  cudaMemset(x, 0x3c, max_bytes); cudaMemset(y, 0, max_bytes); cudaMemset(w, 0x3f, 65536 * 4);
  Bufs b{x, y, w, o};
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  struct V { const char* kind; int l, s; Launch f; };
  std::vector<V> vs = {
      {"copy", kPlain, 1, launch_copy<kPlain, 1>}, {"copy", kCs, 1, launch_copy<kCs, 1>},
      {"copy", kNc, 1, launch_copy<kNc, 1>},       {"copy", kNa, 1, launch_copy<kNa, 1>},
      {"copy", kNaNormal, 1, launch_copy<kNaNormal, 1>}, {"copy", kL1First, 1, launch_copy<kL1First, 1>},
      {"copy", kPlain, 0, launch_copy<kPlain, 0>}, {"copy", kNaNormal, 0, launch_copy<kNaNormal, 0>},
      {"sum", kPlain, -1, launch_sum<kPlain>},     {"sum", kCs, -1, launch_sum<kCs>},
      {"sum", kNa, -1, launch_sum<kNa>},           {"sum", kNaNormal, -1, launch_sum<kNaNormal>},
      {"sum", kL1First, -1, launch_sum<kL1First>},
      {"scale4k", kPlain, 1, launch_scale<kPlain, 1, 4096>},   {"scale4k", kCs, 1, launch_scale<kCs, 1, 4096>},
      {"scale4k", kNaNormal, 1, launch_scale<kNaNormal, 1, 4096>},
      {"scale32k", kPlain, 1, launch_scale<kPlain, 1, 32768>}, {"scale32k", kCs, 1, launch_scale<kCs, 1, 32768>},
      {"scale32k", kNc, 1, launch_scale<kNc, 1, 32768>},       {"scale32k", kNa, 1, launch_scale<kNa, 1, 32768>},
      {"scale32k", kNaNormal, 1, launch_scale<kNaNormal, 1, 32768>},
      {"scale32k", kL1First, 1, launch_scale<kL1First, 1, 32768>},
      {"scale64k", kPlain, 1, launch_scale<kPlain, 1, 65536>}, {"scale64k", kCs, 1, launch_scale<kCs, 1, 65536>},
      {"scale64k", kNaNormal, 1, launch_scale<kNaNormal, 1, 65536>}};
  const size_t sizes[] = {size_t(512) << 20, size_t(2) << 30};
  printf("bytes read (MB) | kernel | load | store | b2b GB/s | after dirty flush | after clean flush  (GB/s: bytes read + written / median time)\n");
  for (int round = 0; round < 2; ++round)
    for (size_t bytes : sizes)
      for (int vi = 0; vi < (int)vs.size(); ++vi) {
        const V& v = vs[round ? vs.size() - 1 - vi : vi];  // the order reversed in round 2
        double gbs[3];
        for (int c = 0; c < 3; ++c) {
          std::vector<float> ms;
          for (int it = 0; it < 25; ++it) {
            if (c == 1) cudaMemsetAsync(flush, it, flush_bytes);
            if (c == 2) read_kernel<<<sms * 8, 256>>>(flush, o, flush_bytes / 16);
            cudaEventRecord(e0); v.f(b, bytes, sms); cudaEventRecord(e1); cudaEventSynchronize(e1);
            float t; cudaEventElapsedTime(&t, e0, e1); if (it >= 3) ms.push_back(t);
          }
          std::sort(ms.begin(), ms.end());
          double moved = double(bytes) * (v.s >= 0 ? 2 : 1);
          gbs[c] = moved / (ms[ms.size() / 2] * 1e-3) / 1e9;
        }
        printf("%5zu | %-8s | %-9s | %-5s | %7.0f | %7.0f | %7.0f\n", bytes >> 20, v.kind, kLoadName[v.l],
               v.s >= 0 ? kStoreName[v.s] : "-", gbs[0], gbs[1], gbs[2]);
      }
  cudaError_t e = cudaDeviceSynchronize();
  printf("%s\n", e ? cudaGetErrorString(e) : "ok");
  return e != cudaSuccess;
}
