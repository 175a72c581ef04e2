// Optimal sorting networks (fewest compare-exchanges known) for 8, 16 and 32 keys, from Bert
// Dobbelaere's list (https://bertdobbelaere.github.io/sorting_networks.html; the tables as QuACK
// 0.2.0's quack/sort/sorting_networks.py holds them): 19, 60 and 185 compare-exchanges, depths
// 6, 10 and 14. Generated code (the layers in order); host and device, so the host tests check
// every 0/1 input (the 0-1 principle). TopkBest8Of16: TopkNetwork<16> pruned to its best 8
// outputs.
#pragma once

#include <cstdint>

#ifdef __CUDACC__
#define QUACK_TOPK_NET_HD __host__ __device__ __forceinline__
#else
#define QUACK_TOPK_NET_HD inline
#endif

namespace quack::detail {

/// (a, b) := (min, max) when kAsc, else (max, min) (unsigned integers).
template <bool kAsc, typename P>
QUACK_TOPK_NET_HD void topk_cas(P& a, P& b) {
  const P lo = a < b ? a : b, hi = a < b ? b : a;
  a = kAsc ? lo : hi;
  b = kAsc ? hi : lo;
}

/// a := the value topk_cas<kAsc> leaves in a (kAsc ? min : max); b's output is not needed.
template <bool kAsc, typename P>
QUACK_TOPK_NET_HD void topk_cas_lo(P& a, const P& b) {
  a = (a < b) == kAsc ? a : b;
}

/// b := the value topk_cas<kAsc> leaves in b (kAsc ? max : min); a's output is not needed.
template <bool kAsc, typename P>
QUACK_TOPK_NET_HD void topk_cas_hi(const P& a, P& b) {
  b = (a < b) == kAsc ? b : a;
}

/// The best 8 of 16 keys, sorted: TopkNetwork<16> with every compare-exchange that no output of
/// the 8 reads removed and those of which one output is read reduced to that min or max
/// (generated; the host tests check every 0/1 input). kAsc: the 8 largest ascending in v[8..15];
/// else the 8 largest descending in v[0..7]. 46 compare-exchanges and 8 single min / max (100
/// min / max operations, against 2·19 + 8 + 2·12 = 108 for two 8-sorts and a bitonic merge).
/// The other 8 entries of v are left unspecified.
struct TopkBest8Of16 {
  template <bool kAsc, typename P>
  QUACK_TOPK_NET_HD static void select(P (&v)[16]) {
    if constexpr (kAsc) {
      topk_cas<kAsc>(v[0], v[13]); topk_cas<kAsc>(v[1], v[12]); topk_cas<kAsc>(v[2], v[15]);
      topk_cas<kAsc>(v[3], v[14]); topk_cas<kAsc>(v[4], v[8]); topk_cas<kAsc>(v[5], v[6]);
      topk_cas<kAsc>(v[7], v[11]); topk_cas<kAsc>(v[9], v[10]);
      topk_cas<kAsc>(v[0], v[5]); topk_cas<kAsc>(v[1], v[7]); topk_cas<kAsc>(v[2], v[9]);
      topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[6], v[13]); topk_cas<kAsc>(v[8], v[14]);
      topk_cas<kAsc>(v[10], v[15]); topk_cas<kAsc>(v[11], v[12]);
      topk_cas<kAsc>(v[0], v[1]); topk_cas<kAsc>(v[2], v[3]); topk_cas<kAsc>(v[4], v[5]);
      topk_cas<kAsc>(v[6], v[8]); topk_cas<kAsc>(v[7], v[9]); topk_cas<kAsc>(v[10], v[11]);
      topk_cas<kAsc>(v[12], v[13]); topk_cas<kAsc>(v[14], v[15]);
      topk_cas_hi<kAsc>(v[0], v[2]); topk_cas<kAsc>(v[1], v[3]); topk_cas<kAsc>(v[4], v[10]);
      topk_cas<kAsc>(v[5], v[11]); topk_cas<kAsc>(v[6], v[7]); topk_cas<kAsc>(v[8], v[9]);
      topk_cas<kAsc>(v[12], v[14]); topk_cas<kAsc>(v[13], v[15]);
      topk_cas_hi<kAsc>(v[1], v[2]); topk_cas<kAsc>(v[3], v[12]); topk_cas_hi<kAsc>(v[4], v[6]);
      topk_cas<kAsc>(v[5], v[7]); topk_cas<kAsc>(v[8], v[10]); topk_cas<kAsc>(v[9], v[11]);
      topk_cas<kAsc>(v[13], v[14]);
      topk_cas_hi<kAsc>(v[2], v[6]); topk_cas_hi<kAsc>(v[5], v[8]); topk_cas<kAsc>(v[7], v[10]);
      topk_cas<kAsc>(v[9], v[13]); topk_cas<kAsc>(v[11], v[14]);
      topk_cas_hi<kAsc>(v[3], v[6]); topk_cas<kAsc>(v[9], v[12]); topk_cas<kAsc>(v[11], v[13]);
      topk_cas_hi<kAsc>(v[6], v[8]); topk_cas<kAsc>(v[7], v[9]); topk_cas<kAsc>(v[10], v[12]);
      topk_cas_hi<kAsc>(v[7], v[8]); topk_cas<kAsc>(v[9], v[10]); topk_cas<kAsc>(v[11], v[12]);
      topk_cas<kAsc>(v[8], v[9]);
    } else {
      topk_cas<kAsc>(v[0], v[13]); topk_cas<kAsc>(v[1], v[12]); topk_cas<kAsc>(v[2], v[15]);
      topk_cas<kAsc>(v[3], v[14]); topk_cas<kAsc>(v[4], v[8]); topk_cas<kAsc>(v[5], v[6]);
      topk_cas<kAsc>(v[7], v[11]); topk_cas<kAsc>(v[9], v[10]);
      topk_cas<kAsc>(v[0], v[5]); topk_cas<kAsc>(v[1], v[7]); topk_cas<kAsc>(v[2], v[9]);
      topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[6], v[13]); topk_cas<kAsc>(v[8], v[14]);
      topk_cas<kAsc>(v[10], v[15]); topk_cas<kAsc>(v[11], v[12]);
      topk_cas<kAsc>(v[0], v[1]); topk_cas<kAsc>(v[2], v[3]); topk_cas<kAsc>(v[4], v[5]);
      topk_cas<kAsc>(v[6], v[8]); topk_cas<kAsc>(v[7], v[9]); topk_cas<kAsc>(v[10], v[11]);
      topk_cas<kAsc>(v[12], v[13]); topk_cas<kAsc>(v[14], v[15]);
      topk_cas<kAsc>(v[0], v[2]); topk_cas<kAsc>(v[1], v[3]); topk_cas<kAsc>(v[4], v[10]);
      topk_cas<kAsc>(v[5], v[11]); topk_cas<kAsc>(v[6], v[7]); topk_cas<kAsc>(v[8], v[9]);
      topk_cas<kAsc>(v[12], v[14]); topk_cas_lo<kAsc>(v[13], v[15]);
      topk_cas<kAsc>(v[1], v[2]); topk_cas<kAsc>(v[3], v[12]); topk_cas<kAsc>(v[4], v[6]);
      topk_cas<kAsc>(v[5], v[7]); topk_cas<kAsc>(v[8], v[10]); topk_cas_lo<kAsc>(v[9], v[11]);
      topk_cas_lo<kAsc>(v[13], v[14]);
      topk_cas<kAsc>(v[1], v[4]); topk_cas<kAsc>(v[2], v[6]); topk_cas<kAsc>(v[5], v[8]);
      topk_cas_lo<kAsc>(v[7], v[10]); topk_cas_lo<kAsc>(v[9], v[13]);
      topk_cas<kAsc>(v[2], v[4]); topk_cas<kAsc>(v[3], v[6]); topk_cas_lo<kAsc>(v[9], v[12]);
      topk_cas<kAsc>(v[3], v[5]); topk_cas<kAsc>(v[6], v[8]); topk_cas_lo<kAsc>(v[7], v[9]);
      topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[5], v[6]); topk_cas_lo<kAsc>(v[7], v[8]);
      topk_cas<kAsc>(v[6], v[7]);
    }
  }
};

template <int N>
struct TopkNetwork;

template <>
struct TopkNetwork<8> {  // 19 compare-exchanges, depth 6
  template <bool kAsc, typename P>
  QUACK_TOPK_NET_HD static void sort(P (&v)[8]) {
    topk_cas<kAsc>(v[0], v[2]); topk_cas<kAsc>(v[1], v[3]); topk_cas<kAsc>(v[4], v[6]);
    topk_cas<kAsc>(v[5], v[7]);
    topk_cas<kAsc>(v[0], v[4]); topk_cas<kAsc>(v[1], v[5]); topk_cas<kAsc>(v[2], v[6]);
    topk_cas<kAsc>(v[3], v[7]);
    topk_cas<kAsc>(v[0], v[1]); topk_cas<kAsc>(v[2], v[3]); topk_cas<kAsc>(v[4], v[5]);
    topk_cas<kAsc>(v[6], v[7]);
    topk_cas<kAsc>(v[2], v[4]); topk_cas<kAsc>(v[3], v[5]);
    topk_cas<kAsc>(v[1], v[4]); topk_cas<kAsc>(v[3], v[6]);
    topk_cas<kAsc>(v[1], v[2]); topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[5], v[6]);
  }
};

template <>
struct TopkNetwork<16> {  // 60 compare-exchanges, depth 10
  template <bool kAsc, typename P>
  QUACK_TOPK_NET_HD static void sort(P (&v)[16]) {
    topk_cas<kAsc>(v[0], v[13]); topk_cas<kAsc>(v[1], v[12]); topk_cas<kAsc>(v[2], v[15]);
    topk_cas<kAsc>(v[3], v[14]); topk_cas<kAsc>(v[4], v[8]); topk_cas<kAsc>(v[5], v[6]);
    topk_cas<kAsc>(v[7], v[11]); topk_cas<kAsc>(v[9], v[10]);
    topk_cas<kAsc>(v[0], v[5]); topk_cas<kAsc>(v[1], v[7]); topk_cas<kAsc>(v[2], v[9]);
    topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[6], v[13]); topk_cas<kAsc>(v[8], v[14]);
    topk_cas<kAsc>(v[10], v[15]); topk_cas<kAsc>(v[11], v[12]);
    topk_cas<kAsc>(v[0], v[1]); topk_cas<kAsc>(v[2], v[3]); topk_cas<kAsc>(v[4], v[5]);
    topk_cas<kAsc>(v[6], v[8]); topk_cas<kAsc>(v[7], v[9]); topk_cas<kAsc>(v[10], v[11]);
    topk_cas<kAsc>(v[12], v[13]); topk_cas<kAsc>(v[14], v[15]);
    topk_cas<kAsc>(v[0], v[2]); topk_cas<kAsc>(v[1], v[3]); topk_cas<kAsc>(v[4], v[10]);
    topk_cas<kAsc>(v[5], v[11]); topk_cas<kAsc>(v[6], v[7]); topk_cas<kAsc>(v[8], v[9]);
    topk_cas<kAsc>(v[12], v[14]); topk_cas<kAsc>(v[13], v[15]);
    topk_cas<kAsc>(v[1], v[2]); topk_cas<kAsc>(v[3], v[12]); topk_cas<kAsc>(v[4], v[6]);
    topk_cas<kAsc>(v[5], v[7]); topk_cas<kAsc>(v[8], v[10]); topk_cas<kAsc>(v[9], v[11]);
    topk_cas<kAsc>(v[13], v[14]);
    topk_cas<kAsc>(v[1], v[4]); topk_cas<kAsc>(v[2], v[6]); topk_cas<kAsc>(v[5], v[8]);
    topk_cas<kAsc>(v[7], v[10]); topk_cas<kAsc>(v[9], v[13]); topk_cas<kAsc>(v[11], v[14]);
    topk_cas<kAsc>(v[2], v[4]); topk_cas<kAsc>(v[3], v[6]); topk_cas<kAsc>(v[9], v[12]);
    topk_cas<kAsc>(v[11], v[13]);
    topk_cas<kAsc>(v[3], v[5]); topk_cas<kAsc>(v[6], v[8]); topk_cas<kAsc>(v[7], v[9]);
    topk_cas<kAsc>(v[10], v[12]);
    topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[5], v[6]); topk_cas<kAsc>(v[7], v[8]);
    topk_cas<kAsc>(v[9], v[10]); topk_cas<kAsc>(v[11], v[12]);
    topk_cas<kAsc>(v[6], v[7]); topk_cas<kAsc>(v[8], v[9]);
  }
};

template <>
struct TopkNetwork<32> {  // 185 compare-exchanges, depth 14
  template <bool kAsc, typename P>
  QUACK_TOPK_NET_HD static void sort(P (&v)[32]) {
    topk_cas<kAsc>(v[0], v[1]); topk_cas<kAsc>(v[2], v[3]); topk_cas<kAsc>(v[4], v[5]);
    topk_cas<kAsc>(v[6], v[7]); topk_cas<kAsc>(v[8], v[9]); topk_cas<kAsc>(v[10], v[11]);
    topk_cas<kAsc>(v[12], v[13]); topk_cas<kAsc>(v[14], v[15]); topk_cas<kAsc>(v[16], v[17]);
    topk_cas<kAsc>(v[18], v[19]); topk_cas<kAsc>(v[20], v[21]); topk_cas<kAsc>(v[22], v[23]);
    topk_cas<kAsc>(v[24], v[25]); topk_cas<kAsc>(v[26], v[27]); topk_cas<kAsc>(v[28], v[29]);
    topk_cas<kAsc>(v[30], v[31]);
    topk_cas<kAsc>(v[0], v[2]); topk_cas<kAsc>(v[1], v[3]); topk_cas<kAsc>(v[4], v[6]);
    topk_cas<kAsc>(v[5], v[7]); topk_cas<kAsc>(v[8], v[10]); topk_cas<kAsc>(v[9], v[11]);
    topk_cas<kAsc>(v[12], v[14]); topk_cas<kAsc>(v[13], v[15]); topk_cas<kAsc>(v[16], v[18]);
    topk_cas<kAsc>(v[17], v[19]); topk_cas<kAsc>(v[20], v[22]); topk_cas<kAsc>(v[21], v[23]);
    topk_cas<kAsc>(v[24], v[26]); topk_cas<kAsc>(v[25], v[27]); topk_cas<kAsc>(v[28], v[30]);
    topk_cas<kAsc>(v[29], v[31]);
    topk_cas<kAsc>(v[0], v[4]); topk_cas<kAsc>(v[1], v[5]); topk_cas<kAsc>(v[2], v[6]);
    topk_cas<kAsc>(v[3], v[7]); topk_cas<kAsc>(v[8], v[12]); topk_cas<kAsc>(v[9], v[13]);
    topk_cas<kAsc>(v[10], v[14]); topk_cas<kAsc>(v[11], v[15]); topk_cas<kAsc>(v[16], v[20]);
    topk_cas<kAsc>(v[17], v[21]); topk_cas<kAsc>(v[18], v[22]); topk_cas<kAsc>(v[19], v[23]);
    topk_cas<kAsc>(v[24], v[28]); topk_cas<kAsc>(v[25], v[29]); topk_cas<kAsc>(v[26], v[30]);
    topk_cas<kAsc>(v[27], v[31]);
    topk_cas<kAsc>(v[0], v[8]); topk_cas<kAsc>(v[1], v[9]); topk_cas<kAsc>(v[2], v[10]);
    topk_cas<kAsc>(v[3], v[11]); topk_cas<kAsc>(v[4], v[12]); topk_cas<kAsc>(v[5], v[13]);
    topk_cas<kAsc>(v[6], v[14]); topk_cas<kAsc>(v[7], v[15]); topk_cas<kAsc>(v[16], v[24]);
    topk_cas<kAsc>(v[17], v[25]); topk_cas<kAsc>(v[18], v[26]); topk_cas<kAsc>(v[19], v[27]);
    topk_cas<kAsc>(v[20], v[28]); topk_cas<kAsc>(v[21], v[29]); topk_cas<kAsc>(v[22], v[30]);
    topk_cas<kAsc>(v[23], v[31]);
    topk_cas<kAsc>(v[0], v[16]); topk_cas<kAsc>(v[1], v[8]); topk_cas<kAsc>(v[2], v[4]);
    topk_cas<kAsc>(v[3], v[12]); topk_cas<kAsc>(v[5], v[10]); topk_cas<kAsc>(v[6], v[9]);
    topk_cas<kAsc>(v[7], v[14]); topk_cas<kAsc>(v[11], v[13]); topk_cas<kAsc>(v[15], v[31]);
    topk_cas<kAsc>(v[17], v[24]); topk_cas<kAsc>(v[18], v[20]); topk_cas<kAsc>(v[19], v[28]);
    topk_cas<kAsc>(v[21], v[26]); topk_cas<kAsc>(v[22], v[25]); topk_cas<kAsc>(v[23], v[30]);
    topk_cas<kAsc>(v[27], v[29]);
    topk_cas<kAsc>(v[1], v[2]); topk_cas<kAsc>(v[3], v[5]); topk_cas<kAsc>(v[4], v[8]);
    topk_cas<kAsc>(v[6], v[22]); topk_cas<kAsc>(v[7], v[11]); topk_cas<kAsc>(v[9], v[25]);
    topk_cas<kAsc>(v[10], v[12]); topk_cas<kAsc>(v[13], v[14]); topk_cas<kAsc>(v[17], v[18]);
    topk_cas<kAsc>(v[19], v[21]); topk_cas<kAsc>(v[20], v[24]); topk_cas<kAsc>(v[23], v[27]);
    topk_cas<kAsc>(v[26], v[28]); topk_cas<kAsc>(v[29], v[30]);
    topk_cas<kAsc>(v[1], v[17]); topk_cas<kAsc>(v[2], v[18]); topk_cas<kAsc>(v[3], v[19]);
    topk_cas<kAsc>(v[4], v[20]); topk_cas<kAsc>(v[5], v[10]); topk_cas<kAsc>(v[7], v[23]);
    topk_cas<kAsc>(v[8], v[24]); topk_cas<kAsc>(v[11], v[27]); topk_cas<kAsc>(v[12], v[28]);
    topk_cas<kAsc>(v[13], v[29]); topk_cas<kAsc>(v[14], v[30]); topk_cas<kAsc>(v[21], v[26]);
    topk_cas<kAsc>(v[3], v[17]); topk_cas<kAsc>(v[4], v[16]); topk_cas<kAsc>(v[5], v[21]);
    topk_cas<kAsc>(v[6], v[18]); topk_cas<kAsc>(v[7], v[9]); topk_cas<kAsc>(v[8], v[20]);
    topk_cas<kAsc>(v[10], v[26]); topk_cas<kAsc>(v[11], v[23]); topk_cas<kAsc>(v[13], v[25]);
    topk_cas<kAsc>(v[14], v[28]); topk_cas<kAsc>(v[15], v[27]); topk_cas<kAsc>(v[22], v[24]);
    topk_cas<kAsc>(v[1], v[4]); topk_cas<kAsc>(v[3], v[8]); topk_cas<kAsc>(v[5], v[16]);
    topk_cas<kAsc>(v[7], v[17]); topk_cas<kAsc>(v[9], v[21]); topk_cas<kAsc>(v[10], v[22]);
    topk_cas<kAsc>(v[11], v[19]); topk_cas<kAsc>(v[12], v[20]); topk_cas<kAsc>(v[14], v[24]);
    topk_cas<kAsc>(v[15], v[26]); topk_cas<kAsc>(v[23], v[28]); topk_cas<kAsc>(v[27], v[30]);
    topk_cas<kAsc>(v[2], v[5]); topk_cas<kAsc>(v[7], v[8]); topk_cas<kAsc>(v[9], v[18]);
    topk_cas<kAsc>(v[11], v[17]); topk_cas<kAsc>(v[12], v[16]); topk_cas<kAsc>(v[13], v[22]);
    topk_cas<kAsc>(v[14], v[20]); topk_cas<kAsc>(v[15], v[19]); topk_cas<kAsc>(v[23], v[24]);
    topk_cas<kAsc>(v[26], v[29]);
    topk_cas<kAsc>(v[2], v[4]); topk_cas<kAsc>(v[6], v[12]); topk_cas<kAsc>(v[9], v[16]);
    topk_cas<kAsc>(v[10], v[11]); topk_cas<kAsc>(v[13], v[17]); topk_cas<kAsc>(v[14], v[18]);
    topk_cas<kAsc>(v[15], v[22]); topk_cas<kAsc>(v[19], v[25]); topk_cas<kAsc>(v[20], v[21]);
    topk_cas<kAsc>(v[27], v[29]);
    topk_cas<kAsc>(v[5], v[6]); topk_cas<kAsc>(v[8], v[12]); topk_cas<kAsc>(v[9], v[10]);
    topk_cas<kAsc>(v[11], v[13]); topk_cas<kAsc>(v[14], v[16]); topk_cas<kAsc>(v[15], v[17]);
    topk_cas<kAsc>(v[18], v[20]); topk_cas<kAsc>(v[19], v[23]); topk_cas<kAsc>(v[21], v[22]);
    topk_cas<kAsc>(v[25], v[26]);
    topk_cas<kAsc>(v[3], v[5]); topk_cas<kAsc>(v[6], v[7]); topk_cas<kAsc>(v[8], v[9]);
    topk_cas<kAsc>(v[10], v[12]); topk_cas<kAsc>(v[11], v[14]); topk_cas<kAsc>(v[13], v[16]);
    topk_cas<kAsc>(v[15], v[18]); topk_cas<kAsc>(v[17], v[20]); topk_cas<kAsc>(v[19], v[21]);
    topk_cas<kAsc>(v[22], v[23]); topk_cas<kAsc>(v[24], v[25]); topk_cas<kAsc>(v[26], v[28]);
    topk_cas<kAsc>(v[3], v[4]); topk_cas<kAsc>(v[5], v[6]); topk_cas<kAsc>(v[7], v[8]);
    topk_cas<kAsc>(v[9], v[10]); topk_cas<kAsc>(v[11], v[12]); topk_cas<kAsc>(v[13], v[14]);
    topk_cas<kAsc>(v[15], v[16]); topk_cas<kAsc>(v[17], v[18]); topk_cas<kAsc>(v[19], v[20]);
    topk_cas<kAsc>(v[21], v[22]); topk_cas<kAsc>(v[23], v[24]); topk_cas<kAsc>(v[25], v[26]);
    topk_cas<kAsc>(v[27], v[28]);
  }
};

}  // namespace quack::detail
