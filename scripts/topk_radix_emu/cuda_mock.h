// Host emulation of the CUDA device API the top-k radix kernel uses (run.sh): one CTA at a time,
// its threads as ucontext fibers that switch only at barriers and warp collectives (in a random
// order between them), shared memory a global array poisoned per CTA (launch_mock.h); a barrier
// that never completes aborts ("deadlock"). Warp collectives assume full warps (the kernel's
// masks are all 0xffffffff; __shfl_xor_sync also takes the mask of an aligned group of lanes:
// those lanes meet at a barrier of their own). Atomics are plain read-modify-writes (fibers never interleave
// inside one).
#pragma once
#include <ucontext.h>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>
#include <algorithm>
#include <type_traits>

#define __CUDACC__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__
#define __align__(n) __attribute__((aligned(n)))
#define __launch_bounds__(...)

struct uint4 { uint32_t x, y, z, w; };
struct uint2 { uint32_t x, y; };
struct float2 { float x, y; };
inline float2 make_float2(float x, float y) { return {x, y}; }
inline uint4 make_uint4(uint32_t a, uint32_t b, uint32_t c, uint32_t d) { return {a, b, c, d}; }
struct dim3e { unsigned x, y, z; };
typedef void* cudaStream_t;
typedef int cudaError_t;

namespace emu {
struct Barrier { int expected = 0; int arrived = 0; long phase = 0; };
struct Fiber { ucontext_t ctx; std::vector<char> stack; bool done = false; int tid = 0; };
struct Warp { Barrier bar; Barrier group[32]; uint64_t slot[32]; };
struct State {
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  Barrier cta;
  ucontext_t sched;
  int current = 0;
  long progress = 0;
  unsigned block = 0, grid = 0, block_dim = 0;
  std::function<void()> body;
  std::mt19937 rng{7};
};
inline State& st() { static State s; return s; }
inline void yield() { State& s = st(); swapcontext(&s.fibers[s.current].ctx, &s.sched); }
inline void wait(Barrier& b) {
  const long ph = b.phase;
  if (++b.arrived == b.expected) { b.arrived = 0; ++b.phase; ++st().progress; return; }
  while (b.phase == ph) yield();
}
inline int tid() { return st().fibers[st().current].tid; }
inline int lane() { return tid() & 31; }
inline Warp& warp() { return st().warps[tid() >> 5]; }
inline void entry() { State& s = st(); s.body(); s.fibers[s.current].done = true; ++s.progress; swapcontext(&s.fibers[s.current].ctx, &s.sched); }
// Runs body() as `threads` fibers of one CTA.
inline void run_cta(unsigned block, unsigned threads, const std::function<void()>& body) {
  State& s = st();
  s.block = block; s.block_dim = threads; s.body = body;
  s.fibers.assign(threads, Fiber{});
  s.warps.assign((threads + 31) / 32, Warp{});
  for (auto& w : s.warps) w.bar.expected = 32;
  s.cta = Barrier{}; s.cta.expected = static_cast<int>(threads);
  for (unsigned t = 0; t < threads; ++t) {
    Fiber& f = s.fibers[t];
    f.tid = static_cast<int>(t);
    f.stack.resize(256 * 1024);
    getcontext(&f.ctx);
    f.ctx.uc_stack.ss_sp = f.stack.data();
    f.ctx.uc_stack.ss_size = f.stack.size();
    f.ctx.uc_link = nullptr;
    makecontext(&f.ctx, entry, 0);
  }
  std::vector<int> order(threads);
  for (unsigned t = 0; t < threads; ++t) order[t] = static_cast<int>(t);
  while (true) {
    bool any = false;
    const long before = s.progress;
    std::shuffle(order.begin(), order.end(), s.rng);  // any interleaving between barriers
    for (int t : order) {
      if (s.fibers[t].done) continue;
      any = true;
      s.current = t;
      swapcontext(&s.sched, &s.fibers[t].ctx);
    }
    if (!any) break;
    if (s.progress == before) { std::fprintf(stderr, "emu: deadlock in block %u\n", block); std::abort(); }
  }
}
template <class T> uint64_t bits(T v) { uint64_t b = 0; std::memcpy(&b, &v, sizeof(T)); return b; }
template <class T> T from_bits(uint64_t b) { T v; std::memcpy(&v, &b, sizeof(T)); return v; }
template <class T> T exchange(T v, int src) {
  Warp& w = warp();
  w.slot[lane()] = bits(v);
  wait(w.bar);
  const T r = from_bits<T>(w.slot[src]);
  wait(w.bar);
  return r;
}
// The exchange among the lanes of `mask` (an aligned group of lanes, or the full warp).
template <class T> T exchange_masked(unsigned mask, T v, int src) {
  if (mask == 0xffffffffu) return exchange(v, src);
  const int n = __builtin_popcount(mask), first = __builtin_ctz(mask);
  if ((mask >> first) != (n == 32 ? 0xffffffffu : (1u << n) - 1u) || first % n != 0 ||
      !((mask >> lane()) & 1u) || !((mask >> src) & 1u)) {
    std::fprintf(stderr, "emu: bad shuffle mask %08x (lane %d, source %d)\n", mask, lane(), src);
    std::abort();
  }
  Warp& w = warp();
  Barrier& b = w.group[first];
  b.expected = n;
  w.slot[lane()] = bits(v);
  wait(b);
  const T r = from_bits<T>(w.slot[src]);
  wait(b);
  return r;
}
inline unsigned ballot(bool p) {
  Warp& w = warp();
  w.slot[lane()] = p;
  wait(w.bar);
  unsigned m = 0;
  for (int l = 0; l < 32; ++l) m |= (w.slot[l] ? 1u : 0u) << l;
  wait(w.bar);
  return m;
}
inline uint32_t prmt(uint32_t a, uint32_t b, uint32_t c, bool sign_mode) {
  const uint64_t v = (static_cast<uint64_t>(b) << 32) | a;
  uint32_t d = 0;
  for (int i = 0; i < 4; ++i) {
    const uint32_t sel = (c >> (4 * i)) & 0xf;
    uint32_t byte = (v >> (8 * (sel & 7))) & 0xff;
    if (sign_mode && (sel & 8)) byte = (byte & 0x80) ? 0xff : 0;
    d |= byte << (8 * i);
  }
  return d;
}
/// set.nan.u32.{bf16x2,f16x2} d, w, w: 0xffff per NaN half (exponent all ones: inf = `inf`, the
/// pattern of +infinity; above it a NaN), else 0.
inline uint32_t set_nan2(uint32_t w, uint32_t inf) {
  uint32_t d = 0;
  for (int i = 0; i < 2; ++i)
    if (((w >> (16 * i)) & 0x7fffu) > inf) d |= 0xffffu << (16 * i);
  return d;
}
}  // namespace emu

#define threadIdx (dim3e{static_cast<unsigned>(::emu::tid()), 0, 0})
#define blockIdx (dim3e{::emu::st().block, 0, 0})
#define blockDim (dim3e{::emu::st().block_dim, 0, 0})
#define gridDim (dim3e{::emu::st().grid, 0, 0})

inline void __syncthreads() { emu::wait(emu::st().cta); }
inline void __syncwarp(unsigned = 0xffffffffu) { emu::wait(emu::warp().bar); }
template <class T> T __shfl_sync(unsigned, T v, int src, int width = 32) {
  const int base = emu::lane() & ~(width - 1);
  return emu::exchange(v, base + (src & (width - 1)));
}
template <class T> T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
  return emu::exchange_masked(mask, v, emu::lane() ^ m);
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned d, int width = 32) {
  const int l = emu::lane();
  const int src = (l & (width - 1)) >= static_cast<int>(d) ? l - static_cast<int>(d) : l;
  return emu::exchange(v, src);
}
template <class T> T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  const int l = emu::lane();
  const int src = (l & (width - 1)) + static_cast<int>(d) < width ? l + static_cast<int>(d) : l;
  return emu::exchange_masked(mask, v, src);
}
// A group mask (an aligned group of lanes): the group's lanes meet alone (lanes outside it may
// have left).
inline unsigned __ballot_sync(unsigned mask, int p) {
  if (mask == 0xffffffffu) return emu::ballot(p != 0);
  unsigned m = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) m |= (emu::exchange_masked(mask, p != 0 ? 1u : 0u, l) ? 1u : 0u) << l;
  return m;
}
inline int __any_sync(unsigned, int p) { return emu::ballot(p != 0) != 0; }
inline unsigned __reduce_add_sync(unsigned, unsigned v) {
  unsigned s = 0;
  for (int l = 0; l < 32; ++l) s += emu::exchange(v, l);
  return s;
}
inline unsigned __reduce_or_sync(unsigned, unsigned v) {
  unsigned s = 0;
  for (int l = 0; l < 32; ++l) s |= emu::exchange(v, l);
  return s;
}
inline unsigned __reduce_max_sync(unsigned mask, unsigned v) {
  unsigned s = 0;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) s = std::max(s, emu::exchange_masked(mask, v, l));
  return s;
}
inline unsigned __reduce_min_sync(unsigned mask, unsigned v) {
  unsigned s = 0xffffffffu;
  for (int l = 0; l < 32; ++l)
    if ((mask >> l) & 1u) s = std::min(s, emu::exchange_masked(mask, v, l));
  return s;
}
inline uint32_t atomicAdd(uint32_t* p, uint32_t v) { const uint32_t o = *p; *p += v; return o; }
inline int __clz(unsigned v) { return v == 0 ? 32 : __builtin_clz(v); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(unsigned v) { return __builtin_ffs(static_cast<int>(v)); }
inline uint32_t __float_as_uint(float f) { return emu::from_bits<uint32_t>(emu::bits(f)); }
inline float __uint_as_float(uint32_t u) { return emu::from_bits<float>(u); }
inline int __float_as_int(float f) { return emu::from_bits<int>(emu::bits(f)); }
inline float __int_as_float(int u) { return emu::from_bits<float>(static_cast<uint32_t>(u)); }
inline uint32_t __byte_perm(uint32_t a, uint32_t b, uint32_t s) { return emu::prmt(a, b, s, false); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
inline int64_t min(int64_t a, int64_t b) { return a < b ? a : b; }
inline int64_t max(int64_t a, int64_t b) { return a > b ? a : b; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> T __ldg(const T* p) { return *p; }
template <class T> void __stcs(T* p, T v) { *p = v; }

// 16-bit float types.
struct __half { uint16_t x; };
struct __nv_bfloat16 { uint16_t x; };
inline __half __ushort_as_half(unsigned short v) { return {v}; }
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline __nv_bfloat16 __ushort_as_bfloat16(unsigned short v) { return {v}; }
inline unsigned short __bfloat16_as_ushort(__nv_bfloat16 h) { return h.x; }
inline float __bfloat162float(__nv_bfloat16 h) { return __uint_as_float(static_cast<uint32_t>(h.x) << 16); }
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  const uint32_t b = __float_as_uint(f);
  if (std::isnan(f)) return {static_cast<uint16_t>((b >> 16) | 0x40)};
  return {static_cast<uint16_t>((b + 0x7fff + ((b >> 16) & 1)) >> 16)};
}
inline float __half2float(__half h) {
  const uint32_t s = (h.x >> 15) & 1, e = (h.x >> 10) & 0x1f, m = h.x & 0x3ff;
  float v;
  if (e == 0) v = std::ldexp(static_cast<float>(m), -24);
  else if (e == 31) v = m ? NAN : INFINITY;
  else v = std::ldexp(static_cast<float>(m | 0x400), static_cast<int>(e) - 25);
  if (e == 31 && m) return __uint_as_float(0x7fc00000u | (s << 31) | (m << 13));
  return s ? -v : v;
}
inline __half __float2half_rn(float f) {
  const uint32_t b = __float_as_uint(f);
  const uint16_t s = static_cast<uint16_t>((b >> 16) & 0x8000);
  if (std::isnan(f)) return {static_cast<uint16_t>(s | 0x7e00 | ((b >> 13) & 0x3ff))};
  const float a = std::fabs(f);
  if (a >= 65520.f) return {static_cast<uint16_t>(s | 0x7c00)};
  if (a < std::ldexp(1.f, -14)) {  // subnormal: multiples of 2^-24, nearest even
    const float q = std::nearbyint(a * std::ldexp(1.f, 24));
    return {static_cast<uint16_t>(s | static_cast<uint16_t>(q))};
  }
  int e;
  std::frexp(a, &e);  // a = f·2^e, f in [0.5, 1)
  const float q = std::nearbyint(std::ldexp(a, 11 - e));  // 11 significant bits
  uint32_t m = static_cast<uint32_t>(q), ex = static_cast<uint32_t>(e - 1 + 15);
  if (m == 2048) { m = 1024; ++ex; }
  if (ex >= 31) return {static_cast<uint16_t>(s | 0x7c00)};
  return {static_cast<uint16_t>(s | (ex << 10) | (m & 0x3ff))};
}
