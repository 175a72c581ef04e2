// Optimal sorting networks (fewest compare-exchanges known) for 8, 16 and 32 keys, from Bert
// Dobbelaere's list (https://bertdobbelaere.github.io/sorting_networks.html; the tables as QuACK
// 0.2.0's quack/sort/sorting_networks.py holds them): 19, 60 and 185 compare-exchanges, depths
// 6, 10 and 14. Each network is a generated table of its compare-exchanges (the layers in order,
// each from a new line) that one function applies, unrolled at compile time; host and device, so
// the host tests check every 0/1 input (the 0-1 principle). TopkBest8Of16: TopkNetwork<16>'s
// table with a pruning string per direction.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>

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

/// The same three for float keys by FMNMX (fminf / fmaxf: the kernel's float keys are never NaN;
/// `a < b ? a : b` would be FSETP + FSEL). Declared before topk_ce: more specialized than the
/// templates above, so overload resolution picks them for float.
template <bool kAsc>
QUACK_TOPK_NET_HD void topk_cas(float& a, float& b) {
  const float lo = fminf(a, b), hi = fmaxf(a, b);
  a = kAsc ? lo : hi;
  b = kAsc ? hi : lo;
}
template <bool kAsc>
QUACK_TOPK_NET_HD void topk_cas_lo(float& a, const float& b) {
  a = kAsc ? fminf(a, b) : fmaxf(a, b);
}
template <bool kAsc>
QUACK_TOPK_NET_HD void topk_cas_hi(const float& a, float& b) {
  b = kAsc ? fmaxf(a, b) : fminf(a, b);
}

/// One compare-exchange (v[kA], v[kB]) as kOp says: 'x' topk_cas, 'l' topk_cas_lo, 'h'
/// topk_cas_hi, '.' left out (a pruned network's unread outputs).
template <bool kAsc, char kOp, int kA, int kB, typename P>
QUACK_TOPK_NET_HD void topk_ce(P* v) {
  if constexpr (kOp == 'x') topk_cas<kAsc>(v[kA], v[kB]);
  else if constexpr (kOp == 'l') topk_cas_lo<kAsc>(v[kA], v[kB]);
  else if constexpr (kOp == 'h') topk_cas_hi<kAsc>(v[kA], v[kB]);
  else static_assert(kOp == '.', "op: x, l, h or .");
}

/// Every compare-exchange of a network applied in full (a plain sort).
struct TopkKeepAll {
  template <int I>
  static constexpr char kOp = 'x';
};

/// A compare-exchange of a network: v[a], v[b].
struct TopkCe {
  int a, b;
};

/// Net's compare-exchanges in order, number I applied as Keep::kOp<I> says (topk_ce).
template <class Net, bool kAsc, class Keep, typename P, int... I>
QUACK_TOPK_NET_HD void topk_apply(P* v, std::integer_sequence<int, I...>) {
  (topk_ce<kAsc, Keep::template kOp<I>, Net::kCe[I].a, Net::kCe[I].b>(v), ...);
}

template <int N>
struct TopkNetworkTable;

template <>
struct TopkNetworkTable<8> {  // 19 compare-exchanges, depth 6
  static constexpr int kCount = 19;
  static constexpr TopkCe kCe[kCount] = {
      {0, 2}, {1, 3}, {4, 6}, {5, 7},
      {0, 4}, {1, 5}, {2, 6}, {3, 7},
      {0, 1}, {2, 3}, {4, 5}, {6, 7},
      {2, 4}, {3, 5},
      {1, 4}, {3, 6},
      {1, 2}, {3, 4}, {5, 6},
  };
};

template <>
struct TopkNetworkTable<16> {  // 60 compare-exchanges, depth 10
  static constexpr int kCount = 60;
  static constexpr TopkCe kCe[kCount] = {
      {0, 13}, {1, 12}, {2, 15}, {3, 14}, {4, 8}, {5, 6}, {7, 11}, {9, 10},
      {0, 5}, {1, 7}, {2, 9}, {3, 4}, {6, 13}, {8, 14}, {10, 15}, {11, 12},
      {0, 1}, {2, 3}, {4, 5}, {6, 8}, {7, 9}, {10, 11}, {12, 13}, {14, 15},
      {0, 2}, {1, 3}, {4, 10}, {5, 11}, {6, 7}, {8, 9}, {12, 14}, {13, 15},
      {1, 2}, {3, 12}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {13, 14},
      {1, 4}, {2, 6}, {5, 8}, {7, 10}, {9, 13}, {11, 14},
      {2, 4}, {3, 6}, {9, 12}, {11, 13},
      {3, 5}, {6, 8}, {7, 9}, {10, 12},
      {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12},
      {6, 7}, {8, 9},
  };
};

template <>
struct TopkNetworkTable<32> {  // 185 compare-exchanges, depth 14
  static constexpr int kCount = 185;
  static constexpr TopkCe kCe[kCount] = {
      {0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15},
      {16, 17}, {18, 19}, {20, 21}, {22, 23}, {24, 25}, {26, 27}, {28, 29}, {30, 31},
      {0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15},
      {16, 18}, {17, 19}, {20, 22}, {21, 23}, {24, 26}, {25, 27}, {28, 30}, {29, 31},
      {0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15},
      {16, 20}, {17, 21}, {18, 22}, {19, 23}, {24, 28}, {25, 29}, {26, 30}, {27, 31},
      {0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15},
      {16, 24}, {17, 25}, {18, 26}, {19, 27}, {20, 28}, {21, 29}, {22, 30}, {23, 31},
      {0, 16}, {1, 8}, {2, 4}, {3, 12}, {5, 10}, {6, 9}, {7, 14}, {11, 13},
      {15, 31}, {17, 24}, {18, 20}, {19, 28}, {21, 26}, {22, 25}, {23, 30}, {27, 29},
      {1, 2}, {3, 5}, {4, 8}, {6, 22}, {7, 11}, {9, 25}, {10, 12}, {13, 14},
      {17, 18}, {19, 21}, {20, 24}, {23, 27}, {26, 28}, {29, 30},
      {1, 17}, {2, 18}, {3, 19}, {4, 20}, {5, 10}, {7, 23}, {8, 24}, {11, 27},
      {12, 28}, {13, 29}, {14, 30}, {21, 26},
      {3, 17}, {4, 16}, {5, 21}, {6, 18}, {7, 9}, {8, 20}, {10, 26}, {11, 23},
      {13, 25}, {14, 28}, {15, 27}, {22, 24},
      {1, 4}, {3, 8}, {5, 16}, {7, 17}, {9, 21}, {10, 22}, {11, 19}, {12, 20},
      {14, 24}, {15, 26}, {23, 28}, {27, 30},
      {2, 5}, {7, 8}, {9, 18}, {11, 17}, {12, 16}, {13, 22}, {14, 20}, {15, 19},
      {23, 24}, {26, 29},
      {2, 4}, {6, 12}, {9, 16}, {10, 11}, {13, 17}, {14, 18}, {15, 22}, {19, 25},
      {20, 21}, {27, 29},
      {5, 6}, {8, 12}, {9, 10}, {11, 13}, {14, 16}, {15, 17}, {18, 20}, {19, 23},
      {21, 22}, {25, 26},
      {3, 5}, {6, 7}, {8, 9}, {10, 12}, {11, 14}, {13, 16}, {15, 18}, {17, 20},
      {19, 21}, {22, 23}, {24, 25}, {26, 28},
      {3, 4}, {5, 6}, {7, 8}, {9, 10}, {11, 12}, {13, 14}, {15, 16}, {17, 18},
      {19, 20}, {21, 22}, {23, 24}, {25, 26}, {27, 28},
  };
};

/// Sorts N keys (8, 16 or 32): kAsc ascending, else descending. apply<kAsc, Keep>: the network
/// pruned as Keep::kOp says (TopkBest8Of16).
template <int N>
struct TopkNetwork {
  using Table = TopkNetworkTable<N>;

  template <bool kAsc, class Keep, typename P>
  QUACK_TOPK_NET_HD static void apply(P (&v)[N]) {
    topk_apply<Table, kAsc, Keep>(v, std::make_integer_sequence<int, Table::kCount>{});
  }

  template <bool kAsc, typename P>
  QUACK_TOPK_NET_HD static void sort(P (&v)[N]) {
    apply<kAsc, TopkKeepAll>(v);
  }
};

/// The best 8 of 16 keys, sorted: TopkNetwork<16> with every compare-exchange that no output of
/// the 8 reads removed ('.') and those of which one output is read reduced to that min or max
/// ('l', 'h'), a string per direction, a layer a chunk (generated; the host tests check every
/// 0/1 input). kAsc: the 8 largest ascending in v[8..15]; else the 8 largest descending in
/// v[0..7]. 46 compare-exchanges and 8 single min / max (100 min / max operations, against
/// 2·19 + 8 + 2·12 = 108 for two 8-sorts and a bitonic merge). The other 8 entries of v are left
/// unspecified.
struct TopkBest8Of16 {
  template <bool kAsc>
  struct Keep {
    template <int I>
    static constexpr char kOp =
        (kAsc ? "xxxxxxxx" "xxxxxxxx" "xxxxxxxx" "hxxxxxxx" "hxhxxxx" ".hhxxx" ".hxx" ".hxx" "..hxx" ".x"
              : "xxxxxxxx" "xxxxxxxx" "xxxxxxxx" "xxxxxxxl" "xxxxxll" "xxxll." "xxl." "xxl." "xxl.." "x.")[I];
  };

  template <bool kAsc, typename P>
  QUACK_TOPK_NET_HD static void select(P (&v)[16]) {
    TopkNetwork<16>::apply<kAsc, Keep<kAsc>>(v);
  }
};

}  // namespace quack::detail
