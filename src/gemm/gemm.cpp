// GEMM public API: validation at the boundary (no CUDA call), problem description, dispatch to
// the kernel instance of the dtypes and operand majors (host only; the instances are generated
// from src/gemm/sm90/instances.txt). A column-major d becomes the kernel's row-major Dᵀ = Bᵀ·Aᵀ here.
// gemm_act and gemm_dact (quack/gemm_act.h) share the validation and dispatch.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <cstdlib>
#include <cctype>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "common/check.h"
#include "gemm/activation_list.h"
#include "common/launch.h"
#include "gemm/gemm_dispatch.h"
#include "gemm/gemm_instances.h"
#include "gemm/gemm_pad.h"
#include "gemm/gemm_problem.h"
#include "gemm/gemm_tune.h"
#include "gemm/streamk.h"
#include "gemm/tile_rule.h"
#include "quack/errors.h"
#include "quack/gemm.h"
#include "quack/gemm_act.h"
#include "quack/gemm_rotary.h"

namespace quack {

using detail::ArgCheck;
using detail::GemmProblem;

namespace {

constexpr int64_t kMaxExtent = std::numeric_limits<int32_t>::max();

std::string str(int64_t v) { return std::to_string(v); }

// "(M, K) = (128, 63)"-style expectation text for a 2-D or 3-D operand.
std::string expect_shape(int ndim, const char* names, int64_t L, int64_t r, int64_t c) {
  std::string n(names), v;
  auto put = [](int64_t x) { return x < 0 ? std::string("*") : str(x); };
  if (ndim == 3) {
    n = "(L, " + n.substr(1);
    v = "(" + put(L) + ", " + put(r) + ", " + put(c) + ")";
  } else {
    v = "(" + put(r) + ", " + put(c) + ")";
  }
  return n + " = " + v;
}

// One matrix operand of the batched problem, in memory terms: ld is the stride between runs of
// its contiguous dimension; batch the stride between batches (any valid value when L == 1);
// `runs` runs of `run` contiguous elements per batch, L batches. tma: TMA can address it (16-byte
// aligned base, leading and batch strides multiples of 16 bytes); else a and b are copied
// (gemm_pad.h) and c and d go through the kernel's plain loads and stores.
struct Operand {
  const TensorRef* t = nullptr;
  const char* name = "";
  int64_t ld = 0, batch = 0;
  int64_t run = 0, runs = 0, l = 1;
  bool tma = true;
};

// Which of the two matrix dimensions of a 2-D (or batched) tensor is contiguous: the last
// (row-major) or the one before (column-major).
enum class Orient { kRow, kCol };

const char* orient_name(Orient o) { return o == Orient::kRow ? "row-major" : "column-major"; }

// The orientation the strides give: the dimension of extent > 1 with stride 1 (the last one
// first). A dimension of extent 1 has no stride that matters, so otherwise an (R, 1) tensor is
// row-major (rows apart by its first stride) and a (1, C) one column-major (columns apart by its
// second stride); an (R, 1) tensor with strides (1, *), as torch makes it, is column-major.
// False when neither applies (no dimension of stride 1, both extents > 1).
bool orient_of(const TensorRef& t, Orient* out) {
  const int o = t.ndim - 2;
  const int64_t rows = t.shape[o], cols = t.shape[o + 1];
  if (cols > 1 && t.stride[o + 1] == 1) *out = Orient::kRow;
  else if (rows > 1 && t.stride[o] == 1) *out = Orient::kCol;
  else if (cols == 1) *out = Orient::kRow;
  else if (rows == 1) *out = Orient::kCol;
  else return false;
  return true;
}

// Shape of an operand: 2-D (rows, cols) or 3-D (L, rows, cols), same rank as a.
void check_shape(const ArgCheck& chk, const TensorRef& t, const char* name, int ndim, int64_t L,
                 int64_t rows, int64_t cols, const char* names) {
  chk.required(t, name);
  if (t.ndim != ndim)
    chk.fail(std::string(name) + " has " + str(t.ndim) + " dimensions " + describe(t) +
             ", expected " + str(ndim) + " like a (all 2-D, or all 3-D with a batch dimension)");
  const int o = ndim - 2;
  if ((ndim == 3 && t.shape[0] != L) || (rows >= 0 && t.shape[o] != rows) ||
      (cols >= 0 && t.shape[o + 1] != cols))
    chk.fail(std::string(name) + " has shape " + describe(t) + ", expected " +
             expect_shape(ndim, names, L, rows, cols));
  chk.no_negative_strides(t, name);
}

// The orientation of a, b or d (each may be either); `layouts` names both for the message.
Orient check_orient(const ArgCheck& chk, const TensorRef& t, const char* name, const char* layouts) {
  Orient o;
  if (!orient_of(t, &o))
    chk.fail(std::string(name) + " has no dimension of stride 1 (" + detail::describe_full(t) +
             "): not yet supported, expected " + layouts);
  return o;
}

// Layout of an operand of orientation `orient`: stride 1 along its contiguous dimension (unless
// that extent is 1), leading stride ≥ the contiguous extent, batch stride ≠ 0. Whether TMA can
// address it (16-byte base, leading and batch strides multiples of 16 bytes) is recorded, not
// required; its element alignment is ArgCheck::required's (check_shape, before). `layout` names
// the expected layout for the "not yet supported" message. Strides along extents of 1 are
// replaced by valid ones.
Operand check_layout(const ArgCheck& chk, const TensorRef& t, const char* name, Orient orient,
                     const std::string& layout) {
  const int o = t.ndim - 2;
  const int inner_dim = orient == Orient::kRow ? 1 : 0;
  const int inner = o + inner_dim, outer = o + (1 - inner_dim);
  const int64_t n_in = t.shape[inner], n_out = t.shape[outer];
  const int64_t L = t.ndim == 3 ? t.shape[0] : 1;
  const int es = dtype_size(t.dtype);
  const int64_t align = 16 / es;  // elements per 16 bytes
  if (n_in > 1 && t.stride[inner] != 1) {
    Orient other;
    if (orient_of(t, &other) && other != orient)
      chk.fail(std::string(name) + " is " + orient_name(other) + " (" + detail::describe_full(t) +
               "): not yet supported, expected " + layout);
    chk.fail(std::string(name) + " has no dimension of stride 1 (" + detail::describe_full(t) +
             "): not yet supported, expected " + layout);
  }
  const int64_t n_in_padded = (n_in + align - 1) / align * align;
  Operand op;
  op.t = &t;
  op.name = name;
  op.run = n_in;
  op.runs = n_out;
  op.l = L;
  op.ld = n_out > 1 ? t.stride[outer] : n_in_padded;
  if (op.ld < n_in)
    chk.fail(std::string(name) + " has leading stride " + str(op.ld) + " < " + str(n_in) +
             " contiguous elements (" + detail::describe_full(t) + "), expected a stride ≥ " + str(n_in));
  if (L > 1) {
    op.batch = t.stride[0];
    if (op.batch == 0)
      chk.fail(std::string(name) + " has batch stride 0 (" + detail::describe_full(t) +
               "): broadcasting over the batch is not yet supported");
  } else {
    op.batch = op.ld * n_out;  // never stepped; any valid TMA stride
  }
  op.tma = detail::tma_rows_addressable(t.data, es, op.ld, op.batch, L > 1);
  return op;
}

// ---- bias (GemmBias): validated in the user's (M, N) terms, set in the kernel's ----

// One bias vector: (n,) or, for batched problems, (L, n) (a 1-D vector with L > 1 is shared by
// every batch); fp32, bf16 or fp16; stride 1 along n; on the device; its element's alignment.
void check_bias_vec(const ArgCheck& chk, const TensorRef& t, const char* name, int nd, int64_t L, int64_t n,
                    const char* n_name, int dev) {
  if (!t.present()) return;
  chk.required(t, name);
  const std::string want = nd == 3 ? std::string("(") + n_name + ",) or (L, " + n_name + ") = (" + str(n) + ",) or (" +
                                         str(L) + ", " + str(n) + ")"
                                   : std::string("(") + n_name + ",) = (" + str(n) + ",)";
  if (!(t.ndim == 1 || (t.ndim == 2 && nd == 3)))
    chk.fail(std::string(name) + " has " + str(t.ndim) + " dimensions " + describe(t) + ", expected " + want);
  if (t.shape[t.ndim - 1] != n || (t.ndim == 2 && t.shape[0] != L))
    chk.fail(std::string(name) + " has shape " + describe(t) + ", expected " + want);
  chk.dtype_in(t, name, {DType::kFloat32, DType::kBFloat16, DType::kFloat16});
  chk.same_device(t, name, dev);
  chk.no_negative_strides(t, name);
  if (n > 1 && t.stride[t.ndim - 1] != 1)
    chk.fail(std::string(name) + " has stride " + str(t.stride[t.ndim - 1]) + " along " + n_name + " (" +
             detail::describe_full(t) + "), expected a contiguous vector (stride 1)");
}

// bias.row is (N,) / (L, N), bias.col (M,) / (L, M), in the user's terms.
void check_bias(const ArgCheck& chk, const GemmBias& b, int nd, int64_t L, int64_t M, int64_t N, int dev) {
  check_bias_vec(chk, b.row, "bias.row", nd, L, N, "N", dev);
  check_bias_vec(chk, b.col, "bias.col", nd, L, M, "M", dev);
}

// Sets a checked bias on the kernel's problem: the kernel computes Dᵀ when swapped, so the
// user's row vector (indexed by n) is then its column vector (indexed by its m) and vice versa.
void apply_bias(const GemmBias& b, bool swap, GemmProblem& p) {
  auto put = [&](const TensorRef& t, const void** ptr, int64_t* batch, DType* dt) {
    if (!t.present()) return;
    *ptr = t.data;
    *batch = t.ndim == 2 ? t.stride[0] : 0;
    *dt = t.dtype;
  };
  const TensorRef& to_row = swap ? b.col : b.row;
  const TensorRef& to_col = swap ? b.row : b.col;
  put(to_row, &p.row_bias, &p.batch_row_bias, &p.row_bias_dtype);
  put(to_col, &p.col_bias, &p.batch_col_bias, &p.col_bias_dtype);
}

// ---- kernel instances (generated from src/gemm/sm90/instances.txt, one per TU) ----

using detail::GemmEpilogue;
using detail::GemmInstance;
using detail::GemmMajor;
using detail::kGemmInstances;
using Launcher = detail::GemmLauncher;
using Instance = GemmInstance;

constexpr GemmMajor kK = GemmMajor::kK, kMN = GemmMajor::kMN;

// QUACK_GEMM_TILE_N's value that forces instance i's tile configuration: "256" cooperative
// 128x256, 2x1 cluster (the default); "128" pingpong 128x128, 2x1 cluster; "192" pingpong
// 128x192, 2x1; "64" cooperative 128x64, no cluster; "64x128" cooperative 64x128 (one consumer
// warpgroup), 2x1 cluster (B multicast); "64x2" cooperative 128x64, 1x2 cluster (A multicast).
// The kernel name's tile part (Instance::tile, e.g. "128x192pp", "256x128c1x2") is accepted
// too, and is what QUACK_GEMM_TILE takes.
std::string tile_key(const Instance& i) {
  if (i.bm != 128) return str(i.bm) + "x" + str(i.bn);
  if (i.cluster_n == 2) return str(i.bn) + "x2";
  return str(i.bn);
}

// The 128x256 cooperative tile with a 2x1 cluster: a group's base where it is compiled (is_base).
bool is_default(const Instance& i) {
  return i.bm == 128 && i.bn == 256 && !i.pingpong && i.cluster_m == 2 && i.cluster_n == 1 && !i.candidate;
}

// Whether instance i computes p's epilogue and dtypes (C's dtype counts only when C is read;
// output 1's only when the epilogue has one).
bool dtypes_match(const Instance& i, const GemmProblem& p) {
  const DType c = p.c != nullptr ? p.c_dtype : p.d_dtype;
  const bool two = gemm_epilogue_outputs(p.epilogue) == 2;
  return i.epilogue == p.epilogue && i.ab == p.ab_dtype && i.d == p.d_dtype && i.c == c &&
         (!two || i.d1 == p.d1_dtype);
}

// Whether a production lincomb instance adds a C of dtype c into a D of dtype d for inputs of
// dtype ab (any layout): gemm's C dtypes come from the instance list, not a rule beside it.
bool lincomb_c_compiled(DType ab, DType d, DType c) {
  for (const Instance& i : kGemmInstances)
    if (i.epilogue == GemmEpilogue::kLinComb && !i.candidate && i.ab == ab && i.d == d && i.c == c) return true;
  return false;
}

// The user's (a, b, d) orientations that the kernel combination (ka, kb) serves with a row-major
// d (swap = false) or, through Dᵀ = Bᵀ·Aᵀ, a column-major d (swap = true).
std::string user_layouts(GemmMajor ka, GemmMajor kb, bool swap) {
  const GemmMajor ua = swap ? kb : ka, ub = swap ? ka : kb;  // the user's a and b
  return std::string("(") + (ua == kK ? "row" : "column") + ", " + (ub == kK ? "column" : "row") + ", " +
         (swap ? "column" : "row") + ")";
}

// Instances that compute the same problem as base (same dtypes and majors), any tile.
// The tile rule's view of an instance: its tile, cluster and schedule (tile_rule.h).
detail::TileOption tile_option(const Instance& i) { return {i.bm, i.bn, i.cluster_m, i.cluster_n, i.pingpong}; }

bool same_problem(const Instance& i, const Instance& base) {
  return i.epilogue == base.epilogue && i.ab == base.ab && i.d == base.d && i.c == base.c && i.d1 == base.d1 &&
         i.a == base.a && i.b == base.b;
}

// The instance that stands for its group (the instances of one epilogue, dtypes and majors): the
// group's 128x256 cooperative instance, or, in a group without one (the fp16 and fp32-output
// fused epilogues, compiled with one tile each), its first line in the list. The tile rule and
// the autotuner then choose among the whole group.
bool is_base(const Instance& i) {
  if (is_default(i)) return true;
  const Instance* first = nullptr;
  for (const Instance& j : kGemmInstances)
    if (same_problem(j, i)) {
      if (is_default(j)) return false;
      if (first == nullptr) first = &j;
    }
  return first == &i;
}

// The base instance of p's epilogue, dtypes and majors, or InvalidArgument naming the combination
// and listing the (a, b, d) layouts compiled for its dtypes. `dtypes` describes the problem's
// dtypes in the caller's terms ("bfloat16 inputs and bfloat16 d").
const Instance& find_instance(const ArgCheck& chk, const GemmProblem& p, bool swap, const std::string& dtypes,
                              const char* d_name) {
  std::string offered;
  for (const Instance& i : kGemmInstances) {
    if (!dtypes_match(i, p) || i.a != p.a_major || i.b != p.b_major) continue;
    if (is_base(i)) return i;
  }
  for (bool s : {false, true})
    for (const Instance& i : kGemmInstances)
      if (dtypes_match(i, p) && is_base(i)) offered += (offered.empty() ? "" : ", ") + user_layouts(i.a, i.b, s);
  const GemmMajor ua = swap ? p.b_major : p.a_major, ub = swap ? p.a_major : p.b_major;
  chk.fail(std::string("a ") + (ua == kK ? "row-major" : "column-major") + " with b " +
           (ub == kK ? "column-major" : "row-major") + " and " + d_name + " " + (swap ? "column-major" : "row-major") +
           " is not yet supported for " + dtypes + " (no kernel instance), expected (a, b, " + d_name + ") = " +
           (offered.empty() ? std::string("none: no instance for these dtypes") : offered));
}

// The dtypes of p against the instances of its epilogue (any layout): InvalidArgument when none
// computes them, naming the tensors and their dtypes and listing the combinations compiled for
// p's input dtype (or the input dtypes compiled for the epilogue). d_name, c_name, d1_name: the
// caller's names of output 0, of C (null when C is not read) and of output 1 (null: one
// output); a null d_name leaves output 0 and C out (gemm_dgated's packed pairs, always of the
// input dtype). `note`: appended to the message (how an absent tensor's dtype was taken).
void check_compiled_dtypes(const ArgCheck& chk, const GemmProblem& p, const char* d_name, const char* c_name,
                           const char* d1_name, const std::string& note = "") {
  for (const Instance& i : kGemmInstances)
    if (dtypes_match(i, p)) return;  // the common case: no strings built
  std::vector<std::string> combos;
  std::string abs;
  bool ab_found = false;
  auto tuple = [&](DType d, DType c, DType d1) {
    std::vector<DType> v;
    if (d_name) v.push_back(d);
    if (d_name && c_name) v.push_back(c);
    if (d1_name) v.push_back(d1);
    std::string t;
    for (DType x : v) t += (t.empty() ? "" : ", ") + std::string(dtype_name(x));
    return v.size() > 1 ? "(" + t + ")" : t;
  };
  for (const Instance& i : kGemmInstances) {
    if (i.epilogue != p.epilogue) continue;
    const std::string ab = dtype_name(i.ab);
    if (abs.find(ab) == std::string::npos) abs += (abs.empty() ? "" : " or ") + ab;
    if (i.ab != p.ab_dtype) continue;
    ab_found = true;
    if (c_name == nullptr && i.c != i.d) continue;  // an instance for a C of another dtype, and C is not read
    const std::string t = tuple(i.d, i.c, i.d1);
    if (std::find(combos.begin(), combos.end(), t) == combos.end()) combos.push_back(t);
  }
  if (!ab_found)
    chk.fail(std::string("a has dtype ") + dtype_name(p.ab_dtype) + ", expected " +
             (abs.empty() ? std::string("none: no instance of this epilogue") : abs) +
             " (the input dtypes compiled for this epilogue)");
  std::string names, got;
  std::vector<std::pair<const char*, DType>> fields;
  if (d_name) fields.push_back({d_name, p.d_dtype});
  if (d_name && c_name) fields.push_back({c_name, p.c != nullptr ? p.c_dtype : p.d_dtype});
  if (d1_name) fields.push_back({d1_name, p.d1_dtype});
  for (size_t k = 0; k < fields.size(); ++k) {
    const char* sep = k == 0 ? "" : k + 1 == fields.size() ? " and " : ", ";
    got += std::string(sep) + fields[k].first + " " + dtype_name(fields[k].second);
    names += std::string(k == 0 ? "" : ", ") + fields[k].first;
  }
  if (fields.size() > 1) names = "(" + names + ")";
  std::string expected;
  for (size_t k = 0; k < combos.size(); ++k)
    expected += std::string(k == 0 ? "" : k + 1 == combos.size() ? " or " : ", ") + combos[k];
  chk.fail(got + (fields.size() > 1 ? " are" : " is") + " not compiled for " + dtype_name(p.ab_dtype) +
           " inputs (no kernel instance), expected " + names + " = " + expected + note);
}

// Tile choice (at launch; can_implement makes no CUDA call), among the instances of the same
// dtypes and majors: QUACK_GEMM_TILE (the kernel name's tile part, e.g. "128x192pp") or
// QUACK_GEMM_TILE_N (tile_key) force a configuration where its instance exists (unset, empty or
// "auto": the rule); else the rule of tile_rule.h (small M·N: 64x128 or 128x64; pingpong 128x128
// or 128x192 with ≥ 4 tiles per SM, the one of least estimated time, from K = 4096 (kShortK) against
// 128x256 too, but for the fused epilogues' (cooperative_rates); else 128x256). Measured on
// the H200 (docs/performance.md g3, g5): pingpong 128x128 0.999–1.016x cuBLAS at 8192³ and the
// four LLM shapes (128x256: 0.962–0.995), 0.749 at 2048³ (128x256: 0.783). 64x2 (128x64 with a
// 1x2 cluster) is not in the rule: it measured slower than 128x64 without a cluster at M = 128
// and 256 (g4).
// The configurations of base's dtypes and majors, base first.
std::vector<detail::GemmCandidate> candidates(const Instance& base) {
  std::vector<detail::GemmCandidate> out{{base.tile, base.run}};
  for (const Instance& i : kGemmInstances)
    if (&i != &base && same_problem(i, base) && !i.diagnostic) out.push_back({i.tile, i.run});
  return out;
}

// A tile name without its epilogue variant ("128x128ppa1d2" -> "128x128pp", "128x256e64" ->
// "128x256"; instances.txt, "<epilogue>:[e<N>][a<S>[d<D>]]").
std::string without_variant(const char* tile) {
  std::string t(tile);
  size_t n = t.size();
  auto digit = [&](size_t k) { return std::isdigit(static_cast<unsigned char>(t[k])) != 0; };
  size_t m = n;  // a<S>[d<D>]: d<D> only after a<S>
  if (m >= 2 && t[m - 2] == 'd' && digit(m - 1)) m -= 2;
  if (m >= 2 && t[m - 2] == 'a' && digit(m - 1)) n = m - 2;
  // e<N> (digits after an 'e'; a tile part itself has no 'e')
  size_t k = n;
  while (k > 0 && digit(k - 1)) --k;
  if (k < n && k > 0 && t[k - 1] == 'e') n = k - 1;
  return t.substr(0, n);
}

// The instance of base's dtypes and majors with tile configuration `tile`: the name's tile part
// (any instance, A/B candidates included); then, among production instances, the name without
// its epilogue variant (first in list order: "128x128pp" finds gemm_dgated's 128x128ppa1d2,
// "128x256" the forward's 128x256e64), then
// tile_key; or null.
const Instance* with_tile(const Instance& base, const char* tile) {
  for (const Instance& i : kGemmInstances)
    if (std::strcmp(tile, i.tile) == 0 && same_problem(i, base)) return &i;
  for (const Instance& i : kGemmInstances)
    if (!i.candidate && without_variant(i.tile) == tile && same_problem(i, base)) return &i;
  for (const Instance& i : kGemmInstances)
    if (!i.candidate && tile_key(i) == tile && same_problem(i, base)) return &i;
  return nullptr;
}

// The cooperative 128x256's rates in the rule by epilogue (tile_rule.h, CooperativeRates).
detail::CooperativeRates cooperative_rates(GemmEpilogue e) {
  switch (e) {
    case GemmEpilogue::kAct:
    case GemmEpilogue::kDAct:
    case GemmEpilogue::kGated:
    case GemmEpilogue::kDGated:
      return detail::kCooperativeRatesFused;
    default:
      return detail::kCooperativeRates;
  }
}

// The instance that runs p (base: its group's base instance) on a device of `sms` SMs, without a
// CUDA call: the forced one, else the rule's (among the group's production instances; one with
// a C ring only where p reads C: without C its buffers are idle shared memory, e.g. linear +
// cross-entropy's first dweight chunk keeps the cooperative 128x256; at K ≤ kIoWarpMaxK an
// I/O-warp variant in place of its tile's other variant, gemm_dgated's 128x128ppa3d2io, with
// 128x192 pingpong out of the comparison: the rule's 128x128 rate is a1d2's, and a3d2io ran
// 1.05-1.54 x a1d2 there (docs/performance.md, AN2 / AO1) where the rule's estimates put
// 128x192 1.3 % ahead of 128x128 at the demo's fc2 dgrad, 16384x5632x2048; run AS read 128x192pp
// 1-3 % ahead of a3d2io at 16384x14336x2048 (estimated 5.5 %), so that shape loses as much.
// QUACK_GEMM_TILE (then QUACK_GEMM_TILE_N) forces "<tile>" on every group (a tile not compiled for the group runs
// base), or, written "<name part>:<tile>", only on the groups whose base instance's name
// contains <name part> (e.g. "f32_mm:128x256a1d2": linear + cross-entropy's fp32-accumulating
// dweight GEMM, while its other GEMMs keep the rule); "auto", empty or unset (or
// "<name part>:auto"): the rule.
const Instance& choose_instance(const Instance& base, const GemmProblem& p, int64_t sms) {
  for (const char* var : {"QUACK_GEMM_TILE", "QUACK_GEMM_TILE_N"}) {
    const char* e = std::getenv(var);
    if (e && *e && std::strcmp(e, "auto") != 0) {
      const char* tile = e;
      if (const char* colon = std::strchr(e, ':')) {
        if (std::string(base.name).find(std::string(e, colon)) == std::string::npos) continue;
        tile = colon + 1;
        if (*tile == 0 || std::strcmp(tile, "auto") == 0) continue;
      }
      const Instance* i = with_tile(base, tile);
      return i ? *i : base;
    }
  }
  std::vector<const Instance*> same{&base};
  std::vector<detail::TileOption> options{tile_option(base)};
  const bool io_k = p.k <= detail::kIoWarpMaxK && p.c != nullptr;
  const Instance* io = nullptr;  // the group's I/O-warp variant where it may run (tile_rule.h)
  for (const Instance& i : kGemmInstances) {
    if (&i == &base || !same_problem(i, base) || i.candidate) continue;
    if (i.io_warps) {
      if (io_k) io = &i;
    } else if (p.c != nullptr || !i.c_ring) {
      same.push_back(&i);
      options.push_back(tile_option(i));
    }
  }
  const detail::TileQuery q{p.m, p.n, p.k, p.l, sms};
  const detail::CooperativeRates r = cooperative_rates(base.epilogue);
  const double rate192 = io ? 0.0 : detail::kRatePingpong192;
  const Instance& pick = *same[size_t(detail::choose_tile_index(q, options.data(), int(options.size()), rate192,
                                                                r.long_k, r.mid_k, r.short_k))];
  return io && tile_option(*io) == tile_option(pick) ? *io : pick;
}

Launcher choose_tile(const Instance& base, const GemmProblem& p) {
  return choose_instance(base, p, detail::sm_count(p.device)).run;
}

// QUACK_GEMM_RASTER (tile order of the persistent schedule, for measurements): "<order><band>[s]"
// with order m (bands of cluster-tile rows, walked along N: the default), n (bands of columns) or
// h (QuACK 0.2.0's heuristic), band the band width in cluster tiles (≥ 1; default 8), s for
// serpentine bands; e.g. "m8", "h8s". Unset or empty: m8. Throws InvalidArgument otherwise.
void apply_raster_env(GemmProblem& p) {
  const char* e = std::getenv("QUACK_GEMM_RASTER");
  if (e == nullptr || *e == 0) return;
  const std::string v(e);
  size_t i = 1;
  int group = 0;
  bool digits = false;
  for (; i < v.size() && v[i] >= '0' && v[i] <= '9'; ++i) {
    digits = true;
    group = std::min(group * 10 + (v[i] - '0'), 1 << 20);
  }
  const bool serp = i < v.size() && v[i] == 's';
  if (serp) ++i;
  if ((v[0] != 'm' && v[0] != 'n' && v[0] != 'h') || i != v.size() || (digits && group < 1))
    ArgCheck("gemm").fail("QUACK_GEMM_RASTER is '" + v + "', expected <m|n|h>[band width ≥ 1][s], e.g. m8 or h8s");
  p.raster = v[0] == 'm' ? 0 : v[0] == 'n' ? 1 : 2;
  p.raster_group = group;
  p.serpentine = serp;
}

// A padded copy of the kernel's A (a_side) or B into the workspace at byte offset `offset`.
struct Pad {
  detail::PadCopy copy;  // dst set at run time (workspace + offset)
  bool a_side = true;
  int64_t offset = 0;
};

struct Plan {
  GemmProblem p;
  const char* fn = "gemm";  // the public function (CUDA error messages)
  bool empty = false;   // M, N or L is 0: nothing to launch
  bool swapped = false;  // the outputs are column-major: the kernel computes Dᵀ = Bᵀ·Aᵀ
  const Instance* inst = nullptr;  // K > 0: the base kernel instance of the problem (is_base)
  std::vector<Pad> pads;           // operands TMA cannot address (gemm_pad.h)
  size_t workspace_bytes = 0;      // their copies, each 256-byte aligned
  void* streamk_ws = nullptr;      // the caller's stream-K workspace (GemmArgs::streamk_workspace)
  size_t streamk_ws_bytes = 0;
};

// The caller's stream-K workspace (GemmArgs::streamk_workspace): alignment here (no CUDA call),
// its size when the call runs (run_plan: gemm_streamk_workspace_size reads the SM count).
void set_streamk(const ArgCheck& chk, Plan& plan, void* ws, size_t bytes) {
  if (reinterpret_cast<uintptr_t>(ws) % 16 != 0)
    chk.fail("streamk_workspace is not 16-byte aligned, expected a 16-byte aligned device buffer of "
             "gemm_streamk_workspace_size bytes");
  plan.streamk_ws = ws;
  plan.streamk_ws_bytes = bytes;
}

// QUACK_GEMM_STREAMK: "0" off, "1" forced (kStreamKForce), "auto", empty or unset: -1 (the rule
// where the caller gives a workspace). Throws InvalidArgument otherwise.
int streamk_env(const char* fn) {
  const char* e = std::getenv("QUACK_GEMM_STREAMK");
  if (e == nullptr || *e == 0 || std::strcmp(e, "auto") == 0) return -1;
  if (std::strcmp(e, "0") == 0) return detail::kStreamKOff;
  if (std::strcmp(e, "1") == 0) return detail::kStreamKForce;
  ArgCheck(fn).fail(std::string("QUACK_GEMM_STREAMK is '") + e + "', expected 0, 1 or auto");
}

// One flag and one fp32 tile per SM: the largest cooperative tile compiled (found once: the
// stream-K calls ask for it at every launch).
int64_t streamk_slot_bytes() {
  static const int64_t slot = [] {
    int64_t s = 0;
    for (const GemmInstance& i : detail::kGemmInstances)
      if (!i.pingpong) s = std::max<int64_t>(s, int64_t(i.bm) * i.bn * 4);
    return s;
  }();
  return slot;
}

// The caller's workspace (GemmArgs::workspace and the fused GEMMs'), checked whenever one is given
// (quack/gemm.h), not only where padded copies need it: its alignment here, before the empty and
// K = 0 returns; its size in add_pads (need 0 without copies, so any size passes then).
void check_workspace_alignment(const ArgCheck& chk, const void* workspace) {
  if (reinterpret_cast<uintptr_t>(workspace) % 16 != 0)
    chk.fail("workspace is not 16-byte aligned, expected a 16-byte aligned device buffer");
}

// Operands TMA cannot address (ka, kb: the kernel's A and B) are read from padded copies in the
// workspace (gemm_pad.h): records the copies and their bytes in plan and points the kernel's
// strides at the copies' (the pointers are set when the call runs: run_plan). A workspace the
// caller gives is checked against those bytes (0 without copies).
void add_pads(const ArgCheck& chk, Plan& plan, const Operand& ka, const Operand& kb, const void* workspace,
              size_t workspace_bytes) {
  GemmProblem& p = plan.p;
  for (const Operand* op : {&ka, &kb}) {
    if (op->tma) continue;
    Pad pad;
    pad.a_side = op == &ka;
    detail::PadCopy& c = pad.copy;
    c.src = op->t->data;
    c.rows = op->runs;
    c.cols = op->run;
    c.ld = op->ld;
    c.batch = op->batch;
    c.l = op->l;
    c.ld_dst = (op->run + 7) / 8 * 8;
    c.device = p.device;
    pad.offset = int64_t(plan.workspace_bytes);
    plan.workspace_bytes += size_t((c.bytes() + 255) / 256 * 256);
    (pad.a_side ? p.lda : p.ldb) = c.ld_dst;
    (pad.a_side ? p.batch_a : p.batch_b) = c.rows * c.ld_dst;
    plan.pads.push_back(pad);
  }
  if (workspace != nullptr && workspace_bytes < plan.workspace_bytes)
    chk.fail("workspace has " + str(int64_t(workspace_bytes)) + " bytes, expected ≥ " +
             str(int64_t(plan.workspace_bytes)) + " (gemm_workspace_size) for the padded copies of the operands "
             "TMA cannot address");
}

Plan plan_gemm(const GemmArgs& g) {
  ArgCheck chk("gemm", "a");
  chk.required(g.a, "a");
  if (g.a.ndim != 2 && g.a.ndim != 3)
    chk.fail("a has " + str(g.a.ndim) + " dimensions " + describe(g.a) + ", expected 2 (M, K) or 3 (L, M, K)");
  const int nd = g.a.ndim, o = nd - 2;
  const int64_t L = nd == 3 ? g.a.shape[0] : 1, M = g.a.shape[o], K = g.a.shape[o + 1];
  chk.no_negative_strides(g.a, "a");
  check_shape(chk, g.b, "b", nd, L, K, -1, "(K, N)");
  const int64_t N = g.b.shape[o + 1];
  check_shape(chk, g.d, "d", nd, L, M, N, "(M, N)");
  if (g.c.present()) check_shape(chk, g.c, "c", nd, L, M, N, "(M, N)");
  check_bias(chk, g.bias, nd, L, M, N, g.a.device);

  chk.dtype_in(g.a, "a", {DType::kBFloat16, DType::kFloat16});
  if (g.b.dtype != g.a.dtype)
    chk.fail(std::string("b has dtype ") + dtype_name(g.b.dtype) + ", expected " + dtype_name(g.a.dtype) +
             " (a's dtype; mixed input dtypes are not supported)");
  chk.dtype_in(g.d, "d", {g.a.dtype, DType::kFloat32});
  // C: d's dtype, or another dtype where an instance adds it (float32 into a 16-bit d of the
  // inputs' dtype: the _cf32 instances, linear + cross-entropy's last dweight chunk).
  if (g.c.present() && g.c.dtype != g.d.dtype && !lincomb_c_compiled(g.a.dtype, g.d.dtype, g.c.dtype))
    chk.fail(std::string("c has dtype ") + dtype_name(g.c.dtype) + ", expected " + dtype_name(g.d.dtype) +
             " (d's dtype; c of another dtype is not yet supported)");

  const int dev = g.a.device;
  chk.same_device(g.b, "b", dev);
  chk.same_device(g.d, "d", dev);
  if (g.c.present()) chk.same_device(g.c, "c", dev);
  if (g.beta != 0.f && !g.c.present())
    chk.fail("beta is " + std::to_string(g.beta) + " but c is absent, expected c when beta ≠ 0");
  if (g.beta_device && !g.c.present())
    chk.fail("beta_device is given but c is absent, expected c with a device beta");
  if (reinterpret_cast<uintptr_t>(g.alpha_device) % 4 != 0)
    chk.fail("alpha_device is not 4-byte aligned, expected a pointer to one fp32");
  if (reinterpret_cast<uintptr_t>(g.beta_device) % 4 != 0)
    chk.fail("beta_device is not 4-byte aligned, expected a pointer to one fp32");
  if (reinterpret_cast<uintptr_t>(g.tile_counter) % 4 != 0)
    chk.fail("tile_counter is not 4-byte aligned, expected a pointer to one uint32");

  const int64_t ext[] = {M, N, K, L};
  const char* ext_name[] = {"M", "N", "K", "L"};
  for (int i = 0; i < 4; ++i)
    if (ext[i] > kMaxExtent)
      chk.fail(std::string(ext_name[i]) + " = " + str(ext[i]) + " is too large, expected ≤ 2^31 − 1");

  Plan plan;
  GemmProblem& p = plan.p;
  p.m = int(M);
  p.n = int(N);
  p.k = int(K);
  p.l = int(L);
  p.ab_dtype = g.a.dtype;
  p.d_dtype = g.d.dtype;
  p.c_dtype = g.c.present() ? g.c.dtype : g.d.dtype;
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.alpha_dev = g.alpha_device;
  p.beta_dev = g.beta_device;
  p.tile_counter = g.tile_counter;
  set_streamk(chk, plan, g.streamk_workspace, g.streamk_workspace_bytes);
  check_workspace_alignment(chk, g.workspace);
  p.device = dev;
  if (g.bias.present()) p.epilogue = GemmEpilogue::kBias;
  if (M == 0 || N == 0 || L == 0) {
    plan.empty = true;
    return plan;
  }
  // D row-major: the kernel's problem as given. D column-major: the kernel computes the row-major
  // Dᵀ (N, M) = Bᵀ·Aᵀ in the same memory (gemm_problem.h).
  const Orient d_or = check_orient(chk, g.d, "d", "row-major (M, N): stride 1 along N, or column-major: stride 1 along M");
  const bool swap = d_or == Orient::kCol;
  const std::string like_d = std::string(orient_name(d_or)) + " like d (c must have d's layout): stride 1 along " +
                             (swap ? "M" : "N");
  const Operand d = check_layout(chk, g.d, "d", d_or, orient_name(d_or));
  chk.non_overlapping(g.d, "d");
  p.d = g.d.data;
  p.ldd = d.ld;
  p.batch_d = d.batch;
  const bool read_c = g.c.present() && (g.beta != 0.f || g.beta_device);
  if (read_c) {
    const Operand c = check_layout(chk, g.c, "c", d_or, like_d);
    p.c = g.c.data;
    p.ldc = c.ld;
    p.batch_c = c.batch;
  }
  // The kernel reads a, b, c and the bias while other tiles store d: a shared byte is a race.
  // d may be c itself (gemm_add_inplace); a and b at K = 0 are empty and pass.
  chk.outputs_apart({{&g.d, "d"}},
                    {{&g.a, "a"}, {&g.b, "b"}, {read_c ? &g.c : nullptr, "c"},
                     {&g.bias.row, "bias.row"}, {&g.bias.col, "bias.col"}},
                    {{&g.d, &g.c}});
  if (swap) {
    p.m = int(N);
    p.n = int(M);
  }
  apply_bias(g.bias, swap, p);
  if (K > 0) {
    const Orient a_or = check_orient(chk, g.a, "a", "row-major (M, K): stride 1 along K, or column-major: stride 1 along M");
    const Orient b_or = check_orient(chk, g.b, "b", "column-major (K, N): stride 1 along K, or row-major: stride 1 along N");
    const Operand a = check_layout(chk, g.a, "a", a_or, orient_name(a_or));
    const Operand b = check_layout(chk, g.b, "b", b_or, orient_name(b_or));
    const GemmMajor a_major = a_or == Orient::kRow ? kK : kMN;  // A (M, K): row-major = K contiguous
    const GemmMajor b_major = b_or == Orient::kCol ? kK : kMN;  // B (K, N): column-major = K contiguous
    // Without the swap the kernel's A is a and its B is b; with it, A is bᵀ and B is aᵀ.
    const Operand& ka = swap ? b : a;
    const Operand& kb = swap ? a : b;
    p.a = ka.t->data;
    p.lda = ka.ld;
    p.batch_a = ka.batch;
    p.a_major = swap ? b_major : a_major;
    p.b = kb.t->data;
    p.ldb = kb.ld;
    p.batch_b = kb.batch;
    p.b_major = swap ? a_major : b_major;
    add_pads(chk, plan, ka, kb, g.workspace, g.workspace_bytes);
  }
  // K = 0 launches no GEMM kernel (gemm_fill_k0), but the dtypes are checked as at K > 0 so that
  // can_implement gives one answer for them; the instance (a's and b's layouts, which K = 0 leaves
  // undefined) only at K > 0. Every instance serves a row-major and a column-major d (through
  // Dᵀ = Bᵀ·Aᵀ) for some layouts of a and b, so the dtypes are all K = 0 can be checked against.
  check_compiled_dtypes(chk, p, "d", p.c != nullptr ? "c" : nullptr, nullptr, g.bias.present() ? " (with a bias)" : "");
  if (K > 0) {
    const std::string c_part =
        p.c != nullptr && p.c_dtype != p.d_dtype ? std::string(", ") + dtype_name(p.c_dtype) + " c" : "";
    const std::string bias_part = g.bias.present() ? " with a bias" : "";
    plan.inst = &find_instance(chk, p, swap,
                               std::string(dtype_name(p.ab_dtype)) + " inputs and " + dtype_name(p.d_dtype) + " d" +
                                   c_part + bias_part,
                               "d");
  }
  return plan;
}

// ---- gemm_act, gemm_dact: the same kernels with another visitor and a second output ----

// Where an (M, N) tensor of a fused GEMM goes in the kernel's problem.
enum class MnRole { kC, kD, kD1 };

// One (M, N) tensor of a fused GEMM: the tile input (C, or gemm_dact's preact) or an output.
// Absent tensors (not present()) are skipped; one that is not read (a C with beta = 0) gets its
// shape and device checked, not its layout.
struct MnArg {
  const TensorRef* t;
  const char* name;
  MnRole role;
  bool read = true;
  int num = 1, den = 1;            // columns: N · num / den (gated outputs: N / 2; packed pairs: 2N)
  const char* shape = "(M, N)";    // for the message
};

// The activations of quack/gemm_act.h, one row per value in value order (row v has value v),
// expanded from src/gemm/activation_list.h (the lists the epilogue visitors branch over):
// activation_name, is_activation, is_gated and activation_from_name read only this. A new
// activation is the enum's next value and one entry in that list; its formulas go to
// src/gemm/activation.cuh, its name to python/quack_cpp/gemm_act_ops.py (ACTIVATIONS or
// GATED_ACTIVATIONS, with a torch reference; test_activation_lists.py checks the names).
struct ActivationInfo {
  Activation value;
  const char* name;
  bool gated;  // of a gate and an up projection (gemm_gated, gemm_dgated); else elementwise
};
#define QUACK_ELEMENTWISE_ROW(A, name) ActivationInfo{Activation::A, name, false},
#define QUACK_GATED_ROW(A, name) ActivationInfo{Activation::A, name, true},
constexpr ActivationInfo kActivationLists[] = {
    ActivationInfo{Activation::kIdentity, "identity", false},
    QUACK_FOR_ELEMENTWISE_ACTS(QUACK_ELEMENTWISE_ROW) QUACK_FOR_GATED_ACTS(QUACK_GATED_ROW)};
#undef QUACK_ELEMENTWISE_ROW
#undef QUACK_GATED_ROW
constexpr int kActivationCount = static_cast<int>(sizeof(kActivationLists) / sizeof(kActivationLists[0]));
// The lists' rows placed at their values (a value past the count fails to compile).
constexpr std::array<ActivationInfo, kActivationCount> activations_by_value() {
  std::array<ActivationInfo, kActivationCount> t{};
  for (const ActivationInfo& a : kActivationLists) t[static_cast<int>(a.value)] = a;
  return t;
}
constexpr std::array<ActivationInfo, kActivationCount> kActivations = activations_by_value();
constexpr bool activations_in_order() {  // every value once: no row left empty
  for (int v = 0; v < kActivationCount; ++v)
    if (static_cast<int>(kActivations[v].value) != v || kActivations[v].name == nullptr) return false;
  return true;
}
static_assert(activations_in_order(), "kActivations: row v has value v");
// The specialised lists (activation_list.h) name activations of their own kind: a gated one in
// the elementwise list would take its visitor's identity branch.
#define QUACK_CHECK_ELEMENTWISE(A, name) \
  static_assert(!kActivations[static_cast<int>(Activation::A)].gated, "QUACK_SPECIALIZED_ELEMENTWISE_ACTS: " name " is gated");
#define QUACK_CHECK_GATED(A, name) \
  static_assert(kActivations[static_cast<int>(Activation::A)].gated, "QUACK_SPECIALIZED_GATED_ACTS: " name " is not gated");
QUACK_SPECIALIZED_ELEMENTWISE_ACTS(QUACK_CHECK_ELEMENTWISE)
QUACK_SPECIALIZED_GATED_ACTS(QUACK_CHECK_GATED)
#undef QUACK_CHECK_ELEMENTWISE
#undef QUACK_CHECK_GATED

// a's row of kActivations; null for a value outside the enum.
const ActivationInfo* activation_info(Activation a) {
  const int v = static_cast<int>(a);
  return v >= 0 && v < kActivationCount ? &kActivations[v] : nullptr;
}

bool is_activation(Activation a) { return activation_info(a) != nullptr; }

// kActivations' names of one kind, comma-separated (the error messages' lists).
std::string activation_names(bool gated) {
  std::string s;
  for (const ActivationInfo& a : kActivations)
    if (a.gated == gated) s += (s.empty() ? "" : ", ") + std::string(a.name);
  return s;
}

// Shapes, devices, layouts and the kernel's problem (sizes, majors, pointers and strides) of a
// fused GEMM: a (M, K), b (K, N) and the (M, N) tensors `mn`, whose first entry (an output,
// present) sets the layout the others must have. Dtypes are checked and set by the caller, which
// then picks the instance (find_instance). Empty problems (M, N or L = 0) return with
// plan.empty and no layout checks, as gemm. row_only: the (M, N) tensors must be row-major (the
// gated epilogues pair adjacent columns of a row).
Plan plan_fused(const ArgCheck& chk, GemmEpilogue epi, const TensorRef& a, const TensorRef& b,
                std::initializer_list<MnArg> mn, const void* workspace, size_t workspace_bytes,
                bool row_only = false) {
  chk.required(a, "a");
  if (a.ndim != 2 && a.ndim != 3)
    chk.fail("a has " + str(a.ndim) + " dimensions " + describe(a) + ", expected 2 (M, K) or 3 (L, M, K)");
  const int nd = a.ndim, o = nd - 2;
  const int64_t L = nd == 3 ? a.shape[0] : 1, M = a.shape[o], K = a.shape[o + 1];
  chk.no_negative_strides(a, "a");
  check_shape(chk, b, "b", nd, L, K, -1, "(K, N)");
  const int64_t N = b.shape[o + 1];
  for (const MnArg& x : mn)
    if (x.t->present()) check_shape(chk, *x.t, x.name, nd, L, M, N * x.num / x.den, x.shape);
  chk.dtype_in(a, "a", {DType::kBFloat16, DType::kFloat16});
  if (b.dtype != a.dtype)
    chk.fail(std::string("b has dtype ") + dtype_name(b.dtype) + ", expected " + dtype_name(a.dtype) +
             " (a's dtype; mixed input dtypes are not supported)");
  const int dev = a.device;
  chk.same_device(b, "b", dev);
  for (const MnArg& x : mn)
    if (x.t->present()) chk.same_device(*x.t, x.name, dev);
  const int64_t ext[] = {M, N, K, L};
  const char* ext_name[] = {"M", "N", "K", "L"};
  for (int i = 0; i < 4; ++i)
    if (ext[i] > kMaxExtent)
      chk.fail(std::string(ext_name[i]) + " = " + str(ext[i]) + " is too large, expected ≤ 2^31 − 1");

  Plan plan;
  GemmProblem& p = plan.p;
  p.m = int(M);
  p.n = int(N);
  p.k = int(K);
  p.l = int(L);
  p.ab_dtype = a.dtype;
  p.epilogue = epi;
  p.device = dev;
  check_workspace_alignment(chk, workspace);
  if (M == 0 || N == 0 || L == 0) {
    plan.empty = true;
    return plan;
  }
  const MnArg& ref = *mn.begin();
  const Orient d_or = row_only ? Orient::kRow
                               : check_orient(chk, *ref.t, ref.name,
                                              "row-major (M, N): stride 1 along N, or column-major: stride 1 along M");
  const bool swap = d_or == Orient::kCol;
  const std::string like_ref = std::string(orient_name(d_or)) + " like " + ref.name + " (the (M, N) tensors share " +
                               ref.name + "'s layout): stride 1 along " + (swap ? "M" : "N");
  for (const MnArg& x : mn) {
    if (!x.t->present() || !x.read) continue;
    const Operand op = check_layout(chk, *x.t, x.name, d_or, x.t == ref.t ? std::string(orient_name(d_or)) : like_ref);
    switch (x.role) {
      case MnRole::kC:
        p.c = x.t->data;
        p.ldc = op.ld;
        p.batch_c = op.batch;
        break;
      case MnRole::kD:
        chk.non_overlapping(*x.t, x.name);
        p.d = x.t->data;
        p.ldd = op.ld;
        p.batch_d = op.batch;
        break;
      case MnRole::kD1:
        chk.non_overlapping(*x.t, x.name);
        p.d1 = x.t->data;
        p.ldd1 = op.ld;
        p.batch_d1 = op.batch;
        break;
    }
  }
  plan.swapped = swap;
  if (swap) {
    p.m = int(N);
    p.n = int(M);
  }
  if (K > 0) {
    const Orient a_or = check_orient(chk, a, "a", "row-major (M, K): stride 1 along K, or column-major: stride 1 along M");
    const Orient b_or = check_orient(chk, b, "b", "column-major (K, N): stride 1 along K, or row-major: stride 1 along N");
    const Operand oa = check_layout(chk, a, "a", a_or, orient_name(a_or));
    const Operand ob = check_layout(chk, b, "b", b_or, orient_name(b_or));
    const GemmMajor a_major = a_or == Orient::kRow ? kK : kMN;
    const GemmMajor b_major = b_or == Orient::kCol ? kK : kMN;
    const Operand& ka = swap ? ob : oa;
    const Operand& kb = swap ? oa : ob;
    p.a = ka.t->data;
    p.lda = ka.ld;
    p.batch_a = ka.batch;
    p.a_major = swap ? b_major : a_major;
    p.b = kb.t->data;
    p.ldb = kb.ld;
    p.batch_b = kb.batch;
    p.b_major = swap ? a_major : b_major;
    add_pads(chk, plan, ka, kb, workspace, workspace_bytes);
  }
  return plan;
}

void check_activation(const ArgCheck& chk, Activation a) {
  if (!is_activation(a) || is_gated(a))
    chk.fail("activation is " + (is_activation(a) ? std::string(activation_name(a)) + " (gated: gemm_gated computes it)"
                                                   : str(static_cast<int>(a))) +
             ", expected one of " + activation_names(false) + " (quack::Activation)");
}

void check_gated_activation(const ArgCheck& chk, Activation a) {
  if (!is_activation(a) || !is_gated(a))
    chk.fail("activation is " + (is_activation(a) ? std::string(activation_name(a)) : str(static_cast<int>(a))) +
             ", expected a gated one: " + activation_names(true) + " (quack::Activation)");
}

// An output dtype: a's dtype or float32 (as gemm's d).
void check_out_dtype(const ArgCheck& chk, const TensorRef& t, const char* name, DType ab) {
  if (t.present()) chk.dtype_in(t, name, {ab, DType::kFloat32});
}

Plan plan_act(const GemmActArgs& g) {
  ArgCheck chk("gemm_act", "a");
  check_activation(chk, g.activation);
  chk.required(g.postact, "postact");
  if (g.beta != 0.f && !g.c.present())
    chk.fail("beta is " + std::to_string(g.beta) + " but c is absent, expected c when beta ≠ 0");
  const bool read_c = g.c.present() && g.beta != 0.f;
  Plan plan = plan_fused(chk, GemmEpilogue::kAct, g.a, g.b,
                         {{&g.postact, "postact", MnRole::kD1}, {&g.preact, "preact", MnRole::kD},
                          {&g.c, "c", MnRole::kC, read_c}},
                         g.workspace, g.workspace_bytes);
  plan.fn = "gemm_act";
  check_bias(chk, g.bias, g.a.ndim, plan.p.l, g.a.shape[g.a.ndim - 2], g.b.shape[g.b.ndim - 1], plan.p.device);
  apply_bias(g.bias, plan.swapped, plan.p);
  check_out_dtype(chk, g.postact, "postact", g.a.dtype);
  check_out_dtype(chk, g.preact, "preact", g.a.dtype);
  check_out_dtype(chk, g.c, "c", g.a.dtype);
  if (g.c.present() && g.preact.present() && g.c.dtype != g.preact.dtype)
    chk.fail(std::string("c has dtype ") + dtype_name(g.c.dtype) + ", expected " + dtype_name(g.preact.dtype) +
             " (preact's dtype)");
  // quack/gemm_act.h: preact and postact apart from each other and from the inputs (the kernel
  // reads those while other tiles store). c counts where it is read (beta ≠ 0): an unread c is
  // only shape-checked, as in gemm.
  chk.outputs_apart({{&g.preact, "preact"}, {&g.postact, "postact"}},
                    {{&g.a, "a"}, {&g.b, "b"}, {read_c ? &g.c : nullptr, "c"},
                     {&g.bias.row, "bias.row"}, {&g.bias.col, "bias.col"}});
  GemmProblem& p = plan.p;
  p.activation = static_cast<int>(g.activation);
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.tile_counter = g.tile_counter;
  set_streamk(chk, plan, g.streamk_workspace, g.streamk_workspace_bytes);
  p.d1_dtype = g.postact.dtype;
  // Output 0's dtype is preact's; without preact it is C's (when read) or postact's.
  p.d_dtype = g.preact.present() ? g.preact.dtype : read_c ? g.c.dtype : g.postact.dtype;
  p.c_dtype = read_c ? g.c.dtype : p.d_dtype;
  // K = 0: the dtypes checked as at K > 0, the instance not looked up (as plan_gemm).
  if (!plan.empty) {
    std::string dtypes = std::string(dtype_name(p.ab_dtype)) + " inputs, ";
    if (g.preact.present()) dtypes += std::string(dtype_name(p.d_dtype)) + " preact, ";
    if (read_c) dtypes += std::string(dtype_name(p.c_dtype)) + " c, ";
    dtypes += std::string(dtype_name(p.d1_dtype)) + " postact";
    check_compiled_dtypes(chk, p, "preact", read_c ? "c" : nullptr, "postact",
                          g.preact.present() ? "" : " (preact is not stored: its dtype is taken as c's or postact's)");
    if (p.k > 0) plan.inst = &find_instance(chk, p, plan.swapped, dtypes, "postact");
  }
  return plan;
}

Plan plan_gated(const GemmGatedArgs& g) {
  ArgCheck chk("gemm_gated", "a");
  check_gated_activation(chk, g.activation);
  chk.required(g.postact, "postact");
  if (g.b.present()) chk.required(g.b, "b");  // its rank before its last extent is read
  if (g.b.present() && g.b.ndim >= 2 && g.b.shape[g.b.ndim - 1] % 2 != 0)
    chk.fail("b has shape " + describe(g.b) + " with N = " + str(g.b.shape[g.b.ndim - 1]) +
             " columns, expected an even N (gate and up columns in pairs" +
             (g.concat_layout ? std::string(", or two halves with concat_layout)") : std::string(")")));
  if (g.beta != 0.f && !g.c.present())
    chk.fail("beta is " + std::to_string(g.beta) + " but c is absent, expected c when beta ≠ 0");
  const bool read_c = g.c.present() && g.beta != 0.f;
  Plan plan = plan_fused(chk, g.concat_layout ? GemmEpilogue::kGatedConcat : GemmEpilogue::kGated, g.a, g.b,
                         {{&g.postact, "postact", MnRole::kD1, true, 1, 2, "(M, N/2)"},
                          {&g.preact, "preact", MnRole::kD},
                          {&g.c, "c", MnRole::kC, read_c}},
                         g.workspace, g.workspace_bytes, /*row_only=*/true);
  plan.fn = "gemm_gated";
  check_bias(chk, g.bias, g.a.ndim, plan.p.l, g.a.shape[g.a.ndim - 2], g.b.shape[g.b.ndim - 1], plan.p.device);
  check_out_dtype(chk, g.postact, "postact", g.a.dtype);
  check_out_dtype(chk, g.preact, "preact", g.a.dtype);
  check_out_dtype(chk, g.c, "c", g.a.dtype);
  if (g.c.present() && g.preact.present() && g.c.dtype != g.preact.dtype)
    chk.fail(std::string("c has dtype ") + dtype_name(g.c.dtype) + ", expected " + dtype_name(g.preact.dtype) +
             " (preact's dtype)");
  // As gemm_act (quack/gemm_act.h): preact and postact apart from each other and the inputs.
  chk.outputs_apart({{&g.preact, "preact"}, {&g.postact, "postact"}},
                    {{&g.a, "a"}, {&g.b, "b"}, {read_c ? &g.c : nullptr, "c"},
                     {&g.bias.row, "bias.row"}, {&g.bias.col, "bias.col"}});
  GemmProblem& p = plan.p;
  apply_bias(g.bias, false, p);
  p.activation = static_cast<int>(g.activation);
  p.alpha = g.alpha;
  p.beta = g.beta;
  p.tile_counter = g.tile_counter;
  set_streamk(chk, plan, g.streamk_workspace, g.streamk_workspace_bytes);
  p.concat = g.concat_layout;
  p.d1_dtype = g.postact.dtype;
  // Output 0's dtype is preact's; without preact it is C's (when read) or postact's.
  p.d_dtype = g.preact.present() ? g.preact.dtype : read_c ? g.c.dtype : g.postact.dtype;
  p.c_dtype = read_c ? g.c.dtype : p.d_dtype;
  // K = 0: the dtypes checked as at K > 0, the instance not looked up (as plan_gemm).
  if (!plan.empty) {
    std::string dtypes = std::string(dtype_name(p.ab_dtype)) + " inputs, ";
    if (g.preact.present()) dtypes += std::string(dtype_name(p.d_dtype)) + " preact, ";
    if (read_c) dtypes += std::string(dtype_name(p.c_dtype)) + " c, ";
    dtypes += std::string(dtype_name(p.d1_dtype)) + " postact" + (g.concat_layout ? " (concat_layout)" : "");
    check_compiled_dtypes(chk, p, "preact", read_c ? "c" : nullptr, "postact",
                          std::string(g.concat_layout ? " with concat_layout" : "") +
                              (g.preact.present() ? "" : " (preact is not stored: its dtype is taken as c's or postact's)"));
    if (p.k > 0) plan.inst = &find_instance(chk, p, false, dtypes, "postact");
  }
  return plan;
}

Plan plan_dgated(const GemmDGatedArgs& g) {
  ArgCheck chk("gemm_dgated", "a");
  check_gated_activation(chk, g.activation);
  chk.required(g.dpreact, "dpreact");
  chk.required(g.preact, "preact");
  Plan plan = plan_fused(chk, GemmEpilogue::kDGated, g.a, g.b,
                         {{&g.dpreact, "dpreact", MnRole::kD, true, 2, 1, "(M, 2H)"},
                          {&g.preact, "preact", MnRole::kC, true, 2, 1, "(M, 2H)"},
                          {&g.postact, "postact", MnRole::kD1, true, 1, 1, "(M, H)"}},
                         g.workspace, g.workspace_bytes, /*row_only=*/true);
  plan.fn = "gemm_dgated";
  // The packed (gate, up) pairs are 16-bit values of a's dtype (DGatedEpilogue<T16>).
  if (g.dpreact.dtype != g.a.dtype)
    chk.fail(std::string("dpreact has dtype ") + dtype_name(g.dpreact.dtype) + ", expected " + dtype_name(g.a.dtype) +
             " (a's dtype: the (gate, up) pairs are packed 16-bit values of the input dtype)");
  check_out_dtype(chk, g.postact, "postact", g.a.dtype);
  if (g.preact.dtype != g.dpreact.dtype)
    chk.fail(std::string("preact has dtype ") + dtype_name(g.preact.dtype) + ", expected " +
             dtype_name(g.dpreact.dtype) + " (dpreact's dtype)");
  // Outputs against inputs: disjoint from a and b; against preact (the epilogue's C), disjoint or
  // preact itself (in place, as quack/gemm.h allows d = c; accepted before this check too).
  // postact (M, H) is never preact's (M, 2H) view, so it must be disjoint.
  chk.outputs_apart({{&g.dpreact, "dpreact"}, {&g.postact, "postact"}},
                    {{&g.a, "a"}, {&g.b, "b"}, {&g.preact, "preact"}}, {{&g.dpreact, &g.preact}});
  GemmProblem& p = plan.p;
  p.activation = static_cast<int>(g.activation);
  p.tile_counter = g.tile_counter;
  set_streamk(chk, plan, g.streamk_workspace, g.streamk_workspace_bytes);
  p.packed_dtype = g.dpreact.dtype;
  // preact and dpreact as (M, H) matrices of 32-bit pairs: strides in 32-bit units, so a 4-byte
  // aligned base and even strides (in 16-bit elements) are required; TMA or the epilogue's plain
  // loads and stores (EpilogueParams::c_plain, d_plain) then move the pairs as fp32 elements.
  p.d_dtype = DType::kFloat32;
  p.c_dtype = DType::kFloat32;
  if (!plan.empty) {
    auto require_pairs = [&](const TensorRef& t, const char* name, int64_t ld, int64_t batch) {
      if (reinterpret_cast<uintptr_t>(t.data) % 4 != 0 || ld % 2 != 0 || batch % 2 != 0)
        chk.fail(std::string(name) + " " + detail::describe_full(t) + " is not a matrix of 4-byte (gate, up) pairs " +
                 "(base address, leading stride " + str(ld) + " or batch stride " + str(batch) +
                 "), expected a 4-byte aligned base and even strides (the pairs are read and written as 32-bit words)");
    };
    require_pairs(g.preact, "preact", p.ldc, p.batch_c);
    require_pairs(g.dpreact, "dpreact", p.ldd, p.batch_d);
    p.ldc /= 2;
    p.batch_c /= 2;
    p.ldd /= 2;
    p.batch_d /= 2;
  }
  // Without postact, output 1 is not stored: any instance of the inputs' dtype serves.
  p.d1_dtype = g.postact.present() ? g.postact.dtype : g.a.dtype;
  // K = 0: the dtypes checked as at K > 0, the instance not looked up (as plan_gemm).
  if (!plan.empty) {
    const std::string dtypes = std::string(dtype_name(p.ab_dtype)) + " inputs, " + dtype_name(p.packed_dtype) +
                               " preact and dpreact, " + dtype_name(p.d1_dtype) + " postact";
    check_compiled_dtypes(chk, p, nullptr, nullptr, "postact",
                          g.postact.present() ? "" : " (postact is not stored: its dtype is taken as a's)");
    if (p.k > 0) plan.inst = &find_instance(chk, p, false, dtypes, "dpreact");
  }
  return plan;
}

Plan plan_dact(const GemmDActArgs& g) {
  ArgCheck chk("gemm_dact", "a");
  check_activation(chk, g.activation);
  chk.required(g.dpreact, "dpreact");
  chk.required(g.preact, "preact");
  Plan plan = plan_fused(chk, GemmEpilogue::kDAct, g.a, g.b,
                         {{&g.dpreact, "dpreact", MnRole::kD}, {&g.preact, "preact", MnRole::kC},
                          {&g.postact, "postact", MnRole::kD1}},
                         g.workspace, g.workspace_bytes);
  plan.fn = "gemm_dact";
  check_out_dtype(chk, g.dpreact, "dpreact", g.a.dtype);
  check_out_dtype(chk, g.postact, "postact", g.a.dtype);
  if (g.preact.dtype != g.dpreact.dtype)
    chk.fail(std::string("preact has dtype ") + dtype_name(g.preact.dtype) + ", expected " +
             dtype_name(g.dpreact.dtype) + " (dpreact's dtype)");
  // Outputs against inputs: disjoint from a and b; against preact (the epilogue's C), disjoint or
  // preact itself (in place, as quack/gemm.h allows d = c; accepted before this check too).
  chk.outputs_apart({{&g.dpreact, "dpreact"}, {&g.postact, "postact"}},
                    {{&g.a, "a"}, {&g.b, "b"}, {&g.preact, "preact"}}, {{&g.dpreact, &g.preact}});
  GemmProblem& p = plan.p;
  p.activation = static_cast<int>(g.activation);
  p.tile_counter = g.tile_counter;
  set_streamk(chk, plan, g.streamk_workspace, g.streamk_workspace_bytes);
  p.d_dtype = g.dpreact.dtype;
  p.c_dtype = g.preact.dtype;
  // Without postact, output 1 is not stored: any instance of preact's dtype serves.
  p.d1_dtype = g.postact.present() ? g.postact.dtype : g.preact.dtype;
  // K = 0: the dtypes checked as at K > 0, the instance not looked up (as plan_gemm).
  if (!plan.empty) {
    const std::string dtypes = std::string(dtype_name(p.ab_dtype)) + " inputs, " + dtype_name(p.d_dtype) +
                               " preact and dpreact, " + dtype_name(p.d1_dtype) + " postact";
    check_compiled_dtypes(chk, p, "dpreact", "preact", "postact",
                          g.postact.present() ? "" : " (postact is not stored: its dtype is taken as preact's)");
    if (p.k > 0) plan.inst = &find_instance(chk, p, plan.swapped, dtypes, "dpreact");
  }
  return plan;
}

Plan plan_rotary(const GemmRotaryArgs& g) {
  ArgCheck chk("gemm_rotary", "a");
  chk.required(g.a, "a");
  chk.required(g.d, "d");
  if (g.a.ndim != 2)
    chk.fail("a has " + str(g.a.ndim) + " dimensions " + describe(g.a) + ", expected 2 (M, K): rows are the " +
             "B · seqlen tokens");
  Plan plan = plan_fused(chk, GemmEpilogue::kRotary, g.a, g.b, {{&g.d, "d", MnRole::kD}}, g.workspace,
                         g.workspace_bytes, /*row_only=*/true);
  plan.fn = "gemm_rotary";
  const int64_t M = g.a.shape[0], N = g.b.shape[1];
  const int64_t hd = g.head_dim, S = g.seqlen;
  if (hd < 2 || hd % 2 != 0)
    chk.fail("head_dim is " + str(hd) + ", expected an even head_dim ≥ 2 (rotated column pairs)");
  if (N % hd != 0)
    chk.fail("b has shape " + describe(g.b) + " with N = " + str(N) + " columns, expected a multiple of head_dim = " +
             str(hd) + " (whole heads)");
  if (g.rotary_cols < 0 || g.rotary_cols > N || g.rotary_cols % hd != 0)
    chk.fail("rotary_cols is " + str(g.rotary_cols) + ", expected a multiple of head_dim = " + str(hd) +
             " in [0, N = " + str(N) + "] (whole heads rotated)");
  if (S < 1 || M % S != 0)
    chk.fail("seqlen is " + str(S) + ", expected seqlen ≥ 1 dividing M = " + str(M) +
             " (the rows are B sequences of seqlen tokens)");
  // Paired tables: cos and sin the two columns of one (S_ro, head_dim / 2, 2) fp32 tensor (sin one
  // element after cos, column stride 2, rows and base 8-byte aligned): the kernel reads (cos, sin)
  // as one float2 per pair and row (epilogue_rotary.cuh).
  const int64_t cs_col = hd / 2 > 1 ? g.cos.stride[1] : 2;
  const bool paired = g.cos.data != nullptr && g.sin.data != nullptr &&
                      static_cast<const float*>(g.sin.data) == static_cast<const float*>(g.cos.data) + 1 &&
                      cs_col == 2 && (hd / 2 == 1 || g.sin.stride[1] == 2) &&
                      reinterpret_cast<uintptr_t>(g.cos.data) % 8 == 0 &&
                      (g.cos.shape[0] <= 1 || g.cos.stride[0] % 2 == 0);
  for (const auto& [t, name] : {std::pair{&g.cos, "cos"}, std::pair{&g.sin, "sin"}}) {
    chk.matrix(*t, name, -1, hd / 2);
    chk.dtype_in(*t, name, {DType::kFloat32});
    chk.same_device(*t, name, plan.p.device);
    chk.no_negative_strides(*t, name);
    if (t->shape[0] < S)
      chk.fail(std::string(name) + " has shape " + describe(*t) + ", expected at least seqlen = " + str(S) +
               " rows (positions)");
    if (hd / 2 > 1 && t->stride[1] != 1 && !paired)
      chk.fail(std::string(name) + " is " + detail::describe_full(*t) +
               ", expected a column stride of 1 (or cos and sin the two columns of one 8-byte aligned (S_ro, "
               "head_dim / 2, 2) tensor: column stride 2, even row stride, sin one element after cos)");
    if (t->stride[0] > kMaxExtent)
      chk.fail(std::string(name) + " has row stride " + str(t->stride[0]) + ", expected ≤ 2^31 − 1");
  }
  if (g.sin.shape[0] != g.cos.shape[0] || (g.cos.shape[0] > 1 && g.sin.stride[0] != g.cos.stride[0]))
    chk.fail("sin is " + detail::describe_full(g.sin) + ", expected cos's shape and strides (" +
             detail::describe_full(g.cos) + ")");
  for (const auto& [t, name] : {std::pair{&g.cos, "cos"}, std::pair{&g.sin, "sin"}}) chk.disjoint(g.d, "d", *t, name);
  if (g.d.present() && g.d.dtype != g.a.dtype)
    chk.fail(std::string("d has dtype ") + dtype_name(g.d.dtype) + ", expected " + dtype_name(g.a.dtype) +
             " (a's dtype)");
  GemmProblem& p = plan.p;
  p.alpha = g.alpha;
  p.tile_counter = g.tile_counter;
  set_streamk(chk, plan, g.streamk_workspace, g.streamk_workspace_bytes);
  p.d_dtype = g.d.dtype;
  p.c_dtype = g.d.dtype;
  p.d1_dtype = g.d.dtype;
  p.rotary_cos = static_cast<const float*>(g.cos.data);
  p.rotary_sin = static_cast<const float*>(g.sin.data);
  p.rotary_ld = g.cos.stride[0];
  p.rotary_paired = paired;
  p.rotary_cols = int(g.rotary_cols);
  p.rotary_head_dim = int(hd);
  p.rotary_seqlen = int(std::min<int64_t>(S, kMaxExtent));
  // K = 0: the dtypes checked as at K > 0, the instance not looked up (as plan_gemm).
  if (!plan.empty) {
    const std::string dtypes = std::string(dtype_name(p.ab_dtype)) + " inputs and " + dtype_name(p.d_dtype) + " d";
    check_compiled_dtypes(chk, p, "d", nullptr, nullptr);
    if (p.k > 0) plan.inst = &find_instance(chk, p, false, dtypes, "d");
  }
  return plan;
}

// Runs a validated plan: nothing (empty), the K = 0 fill, or the padded copies (into the
// caller's workspace, else one allocated on the stream and freed after the launch) and the tuned
// or the rule's instance.
void run_plan(const Plan& plan, bool tuned, void* workspace, cudaStream_t stream) {
  if (plan.empty) return;
  GemmProblem p = plan.p;
  const detail::DeviceGuard guard(p.device, plan.fn);
  if (p.k == 0) {
    detail::gemm_fill_k0(p, plan.fn, stream);
    return;
  }
  apply_raster_env(p);
  // Stream-K: QUACK_GEMM_STREAMK = 0 off, 1 forced, else the rule with the caller's workspace.
  const int env = streamk_env(plan.fn);
  void* sk = nullptr;
  p.streamk = env >= 0 ? env : plan.streamk_ws != nullptr ? detail::kStreamKRule : detail::kStreamKOff;
  const bool sk_own = p.streamk == detail::kStreamKForce && plan.streamk_ws == nullptr;
  int64_t sk_need = 0, sk_flags = 0;
  if (p.streamk != detail::kStreamKOff) {
    sk_flags = detail::StreamKSchedule::flag_bytes(detail::sm_count(p.device));
    sk_need = int64_t(gemm_streamk_workspace_size(p.device));
    if (!sk_own && int64_t(plan.streamk_ws_bytes) < sk_need)
      ArgCheck(plan.fn).fail("streamk_workspace has " + str(int64_t(plan.streamk_ws_bytes)) + " bytes, expected ≥ " +
                             str(sk_need) + " (gemm_streamk_workspace_size of device " + str(p.device) + ")");
  }
  void* ws = workspace;
  const bool own = !plan.pads.empty() && ws == nullptr;
  if (own) detail::check_cuda(cudaMallocAsync(&ws, plan.workspace_bytes, stream), plan.fn, "cudaMallocAsync");
  try {
    if (p.streamk != detail::kStreamKOff) {
      sk = plan.streamk_ws;
      if (sk_own) {  // zeroed flags, freed after the launch (stream-ordered)
        detail::check_cuda(cudaMallocAsync(&sk, size_t(sk_need), stream), plan.fn, "cudaMallocAsync");
        detail::check_cuda(cudaMemsetAsync(sk, 0, size_t(sk_flags), stream), plan.fn, "cudaMemsetAsync");
      }
      p.streamk_ws = sk;
      p.streamk_ws_bytes = sk_need;
      p.streamk_flag_bytes = sk_flags;
    }
    for (const Pad& pad : plan.pads) {
      detail::PadCopy c = pad.copy;
      c.dst = static_cast<char*>(ws) + pad.offset;
      detail::gemm_pad_rows(c, stream);
      (pad.a_side ? p.a : p.b) = c.dst;
    }
    if (tuned)  // the rule's pick stands in while a graph is captured before the first tuning
      detail::gemm_tuned_launcher(p, candidates(*plan.inst), choose_tile(*plan.inst, p), stream)(p, stream);
    else
      choose_tile(*plan.inst, p)(p, stream);
  } catch (...) {
    if (own) cudaFreeAsync(ws, stream);
    if (sk_own && sk != nullptr) cudaFreeAsync(sk, stream);
    throw;
  }
  if (own) detail::check_cuda(cudaFreeAsync(ws, stream), plan.fn, "cudaFreeAsync");
  if (sk_own) detail::check_cuda(cudaFreeAsync(sk, stream), plan.fn, "cudaFreeAsync");
}

// Workspace bytes of args planned by `plan`: the answer does not depend on a workspace already
// given, so it is planned without one.
template <class Args, class PlanFn>
size_t workspace_of(Args query, PlanFn plan) {
  query.workspace = nullptr;
  query.workspace_bytes = 0;
  return plan(query).workspace_bytes;
}

}  // namespace

void can_implement(const GemmArgs& args) { (void)plan_gemm(args); }

namespace detail {

static const char* instance_name(const Plan& plan, int64_t sms) {
  if (plan.empty || plan.p.k == 0) return nullptr;
  return choose_instance(*plan.inst, plan.p, sms).name;
}

const char* gemm_instance_name(const GemmArgs& args, int64_t sms) {
  return instance_name(plan_gemm(args), sms);
}

const char* gemm_instance_name(const GemmActArgs& args, int64_t sms) {
  return instance_name(plan_act(args), sms);
}

const char* gemm_instance_name(const GemmDActArgs& args, int64_t sms) {
  return instance_name(plan_dact(args), sms);
}

const char* gemm_instance_name(const GemmGatedArgs& args, int64_t sms) {
  return instance_name(plan_gated(args), sms);
}

const char* gemm_instance_name(const GemmDGatedArgs& args, int64_t sms) {
  return instance_name(plan_dgated(args), sms);
}

}  // namespace detail

size_t gemm_workspace_size(const GemmArgs& args) { return workspace_of(args, plan_gemm); }

size_t gemm_streamk_workspace_size(int device) {
  const int64_t sms = detail::sm_count(device);
  return size_t(detail::StreamKSchedule::workspace_bytes(sms, streamk_slot_bytes()));
}

void gemm(const GemmArgs& args, cudaStream_t stream) { run_plan(plan_gemm(args), args.tuned, args.workspace, stream); }

const char* activation_name(Activation a) {
  const ActivationInfo* i = activation_info(a);
  return i != nullptr ? i->name : "unknown";
}

bool is_gated(Activation a) {
  const ActivationInfo* i = activation_info(a);
  return i != nullptr && i->gated;
}

bool activation_from_name(const char* name, Activation* out) {
  if (name == nullptr || out == nullptr) return false;
  if (std::strcmp(name, "none") == 0) {
    *out = Activation::kIdentity;
    return true;
  }
  for (const ActivationInfo& i : kActivations)
    if (std::strcmp(name, i.name) == 0) {
      *out = i.value;
      return true;
    }
  return false;
}

void can_implement(const GemmActArgs& args) { (void)plan_act(args); }

size_t gemm_workspace_size(const GemmActArgs& args) { return workspace_of(args, plan_act); }

void gemm_act(const GemmActArgs& args, cudaStream_t stream) {
  run_plan(plan_act(args), args.tuned, args.workspace, stream);
}

void can_implement(const GemmDActArgs& args) { (void)plan_dact(args); }

size_t gemm_workspace_size(const GemmDActArgs& args) { return workspace_of(args, plan_dact); }

void gemm_dact(const GemmDActArgs& args, cudaStream_t stream) {
  run_plan(plan_dact(args), args.tuned, args.workspace, stream);
}

void can_implement(const GemmGatedArgs& args) { (void)plan_gated(args); }

size_t gemm_workspace_size(const GemmGatedArgs& args) { return workspace_of(args, plan_gated); }

void gemm_gated(const GemmGatedArgs& args, cudaStream_t stream) {
  run_plan(plan_gated(args), args.tuned, args.workspace, stream);
}

void can_implement(const GemmDGatedArgs& args) { (void)plan_dgated(args); }

size_t gemm_workspace_size(const GemmDGatedArgs& args) { return workspace_of(args, plan_dgated); }

void gemm_dgated(const GemmDGatedArgs& args, cudaStream_t stream) {
  run_plan(plan_dgated(args), args.tuned, args.workspace, stream);
}

void can_implement(const GemmRotaryArgs& args) { (void)plan_rotary(args); }

size_t gemm_workspace_size(const GemmRotaryArgs& args) { return workspace_of(args, plan_rotary); }

void gemm_rotary(const GemmRotaryArgs& args, cudaStream_t stream) {
  run_plan(plan_rotary(args), args.tuned, args.workspace, stream);
}

}  // namespace quack
