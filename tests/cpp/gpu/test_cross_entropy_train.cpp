// Tier 2: the training pair cross_entropy_fwd (dx, dx_state, dx_predict) ->
// cross_entropy_train_bwd on the device against the float64 reference (cross_entropy_ref.h).
// Skips without a GPU.
//
//   CeTrain.Sequences     grad_output 1, 0.5, 0.5, 1, 0.5 with the prediction word left as each
//                         backward sets it: both predictions (dx written and used as it is,
//                         dx not written and recomputed) and both mispredictions (dx written
//                         then rescaled, dx not written with grad_output 1), for every option
//                         (reduction, ignore_index, label smoothing, z-loss, class weights,
//                         class weights with smoothing, softcap), fp32 / bf16 / fp16, V with a
//                         tail (general policy) and long rows (ring policy).
//   CeTrain.ForcedWord    the word forced to 0 and 1 before each forward.
//   CeTrain.OutOfRangeTargets  C10: targets V, −1 and 2^40 in three rows through the steps:
//                         NaN loss and dx rows on both paths, the other rows right.
//   CeTrain.InPlace       dx = x (inplace_backward): x untouched where dx was not written.
//   CeTrain.OutOfPlace    dx_out given (a retained graph): the forward's dx and state untouched.
//   CeTrain.ForcedConfigs the predicted forward's two kernels (loss only where the word is 0,
//                         loss + dx where it is 1), each forced on every entry of the row
//                         skeleton's table it is compiled for and on the general policy (the
//                         other on its own plan), word 0 and 1: loss and lse right, dx right
//                         or (word 0) untouched; and the single-kernel form (stores gated).
//   CeTrain.PairBitwise   the predicted pair (split forward + training backward) over steps
//                         whose grad_output flips the word both ways, against the separate
//                         calls it stands for: word 1: the forward with dx (no prediction),
//                         then cross_entropy_scale_grad for grad_output ≠ 1; word 0: the
//                         loss-only forward, then cross_entropy_bwd from its lse with dloss =
//                         grad_output · the state's scale. Loss, lse and dx bitwise equal.
//   CeTrain.StageEntryBitwise  cl-t256v8-s1 and -s2 (persistent, the next rows in
//                         shared-memory stages) against cl-t256v8, each forced on the dx
//                         kernel of the predicted forward (word 1) and on the forward with dx
//                         that is not split: loss, lse and dx bitwise equal, clusters of 1 to
//                         16, options, dtypes, in place.
//   CeTrain.Empty         M = 0.
//   CeTrain.ManyRowBlocks at least twice as many row blocks as resident CTAs (V = 16384 bf16:
//                         the register policy), so that every CTA of the gated backward loops
//                         over row blocks: open (recompute, grad_output 0.5 and 1) and closed
//                         (after an open step) as in Sequences; and the backward's kernel forced
//                         to every register, looped and map entry of the table with as many row
//                         blocks or tiles (the gate open: cross_entropy_bwd).
// Each step poisons dx (and dx_out, dx_state) with NaN first; where the forward did not write
// dx its bytes must still be the poison.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cross_entropy/cross_entropy_internal.h"
#include "cross_entropy/cross_entropy_params.h"
#include "gpu/cross_entropy_runner.h"
#include "gpu/gpu_util.h"
#include "row/row_config.h"

namespace quack::test {
namespace {

using detail::kRowConfigCount;
using detail::kRowConfigs;
using detail::RowPolicy;

struct TrainCase {
  int64_t M = 37, V = 4096;
  DType x = DType::kBFloat16;
  Reduction red = Reduction::kMean;
  double eps = 0.0, zs = 0.0, cap = 0.0;
  bool weight = false;
  bool inplace = false;   // dx = x
  bool out_of_place = false;  // dx_out given
  double ignore_frac = 0.3;
  bool bad_targets = false;  // C10: rows 2, 3 and M − 1 get targets V, −1 and 2^40 (M ≥ 5)
  uint64_t seed = 7;
};

std::string train_name(const TrainCase& c) {
  std::string s = "M=" + std::to_string(c.M) + " V=" + std::to_string(c.V) + " " +
                  short_name(c.x) + (c.red == Reduction::kMean ? " mean" : " sum");
  if (c.eps > 0) s += " eps=" + std::to_string(c.eps);
  if (c.zs > 0) s += " zs=" + std::to_string(c.zs);
  if (c.cap > 0) s += " cap=" + std::to_string(c.cap);
  if (c.weight) s += " weight";
  if (c.inplace) s += " inplace";
  if (c.out_of_place) s += " dx_out";
  if (c.bad_targets) s += " bad targets";
  return s;
}

bool all_poison(const std::vector<unsigned char>& bytes) {
  for (unsigned char b : bytes)
    if (b != 0xFF) return false;
  return true;
}

bool all_poison(const DeviceTensor& d) { return all_poison(download_bytes(d)); }

// The forward's workspace, sized for `a`, poisoned and attached to it (keep it alive for the
// call).
DeviceBuffer attach_workspace(CrossEntropyFwdArgs& a) {
  const size_t bytes = cross_entropy_fwd_workspace_size(a);
  DeviceBuffer ws(bytes);
  ws.poison();
  a.workspace = ws.get();
  a.workspace_bytes = bytes;
  return ws;
}

int32_t read_word(const DeviceBuffer& w) {
  int32_t v = -1;
  EXPECT_EQ(cudaMemcpy(&v, w.get(), 4, cudaMemcpyDeviceToHost), cudaSuccess);
  return v;
}

void write_word(const DeviceBuffer& w, int32_t v) {
  EXPECT_EQ(cudaMemcpy(w.get(), &v, 4, cudaMemcpyHostToDevice), cudaSuccess);
}

/// Runs forward + training backward once per entry of gs (grad_output), with the prediction
/// word forced to forced[k] before step k where forced[k] ≥ 0 (else as the previous backward
/// left it; 1 at the start), and checks every step.
void run_sequence(const TrainCase& c, const std::vector<double>& gs,
                  const std::vector<int>& forced = {}) {
  SCOPED_TRACE(train_name(c));
  const int64_t M = c.M, V = c.V;
  Rng rng(c.seed);
  CeCase cc;
  cc.M = M;
  cc.V = V;
  cc.x = c.x;
  cc.ignore_frac = c.ignore_frac;
  std::vector<int64_t> targets = ce_targets(rng, cc);
  if (c.bad_targets) {  // out of range, not ignore_index: NaN rows (the reference's state 2)
    targets[2] = V;
    targets[3] = -1;
    targets[M - 1] = int64_t{1} << 40;  // compared in 64 bits (truncated it would be 0)
  }
  const std::vector<double> xv = random_values(rng, M * V, c.x, 0.0, 2.0);
  DeviceTensor x = upload(xv, c.x, M, V);
  const std::vector<double> xh = download(x);
  DeviceTensor tg = upload_targets(targets, DType::kInt64);
  std::vector<double> wh;
  DeviceTensor w;
  if (c.weight) {
    wh = random_uniform(rng, V, DType::kFloat32, 0.25, 2.0);
    w = upload_vector(wh, DType::kFloat32, V);
  }
  ref::CeOptions o;
  o.ignore_index = -100;
  o.reduction = static_cast<int>(c.red);
  o.eps = c.eps;
  o.zs = c.zs;
  o.cap = c.cap;
  o.weight = c.weight ? &wh : nullptr;
  const ref::CeRef r = ref::cross_entropy_ref(M, V, xh.data(), targets.data(), o, true, nullptr);

  DeviceBuffer word(4);
  write_word(word, 1);
  int32_t expect_word = 1;
  DeviceTensor dx_own = alloc_tensor(c.x, M, V);
  for (size_t k = 0; k < gs.size(); ++k) {
    const double g = gs[k];
    SCOPED_TRACE("step " + std::to_string(k) + " grad_output " + std::to_string(g));
    if (k < forced.size() && forced[k] >= 0) {
      write_word(word, forced[k]);
      expect_word = forced[k];
    }
    const bool written = expect_word != 0;
    if (c.inplace) upload_into(x, xh);  // the previous step's gradient overwrote it
    else dx_own.poison();
    const DeviceTensor& dx = c.inplace ? x : dx_own;
    DeviceTensor loss = alloc_vector(DType::kFloat32, 1);
    DeviceTensor lse = alloc_vector(DType::kFloat32, M);
    DeviceTensor state = alloc_vector(DType::kFloat32, kCrossEntropyDxStateFloats);

    CrossEntropyFwdArgs a;
    a.x = x.ref;
    a.target = tg.ref;
    if (c.weight) a.weight = w.ref;
    a.loss = loss.ref;
    a.lse = lse.ref;
    a.dx = dx.ref;
    a.dx_state = state.ref;
    a.dx_predict = TensorRef::vector(word.get(), DType::kInt32, 1, 0, 1);
    a.reduction = c.red;
    a.label_smoothing = static_cast<float>(c.eps);
    a.z_loss_scale = static_cast<float>(c.zs);
    a.logit_softcap = static_cast<float>(c.cap);
    const DeviceBuffer ws = attach_workspace(a);
    cross_entropy_fwd(a, nullptr);
    QUACK_CUDA_OK(cudaDeviceSynchronize());

    const double tol = tolerance(DType::kFloat32);
    const double got_loss = download(loss)[0];
    if (std::isnan(r.loss)) {  // 'mean' with every row ignored
      EXPECT_TRUE(std::isnan(got_loss)) << "loss " << got_loss << ", expected NaN";
    } else {
      EXPECT_NEAR(got_loss, r.loss, tol * std::fmax(std::fabs(r.loss), r.loss_terms) + 1e-30);
    }
    EXPECT_TRUE(close("lse", download(lse), r.lse, tol, 0, 0.0));
    const std::vector<double> st = download(state);
    const auto st_bytes = download_bytes(state);
    EXPECT_EQ(st[detail::ce::kDxOn], written ? 1.0 : 0.0) << "the state records the prediction";
    if (!written) {
      if (c.inplace) {
        EXPECT_EQ(download(x), xh) << "dx not written: x (= dx) untouched";
      } else {
        EXPECT_TRUE(all_poison(dx_own)) << "dx not written: its poison untouched";
      }
    } else {
      EXPECT_TRUE(ce_close_rows("dx (forward)", download(dx), r.dx, M, V, tolerance(c.x),
                                r.row_terms));
    }
    const auto dx_after_fwd = download_bytes(dx);

    DeviceTensor go = upload_vector({g}, DType::kFloat32, 1);
    DeviceTensor dx_out;
    if (c.out_of_place) dx_out = alloc_tensor(c.x, M, V);
    CrossEntropyTrainBwdArgs b;
    b.x = x.ref;
    b.target = tg.ref;
    b.lse = lse.ref;
    b.grad_output = go.ref;
    if (c.weight) b.weight = w.ref;
    b.dx = dx.ref;
    b.dx_state = state.ref;
    if (c.out_of_place) b.dx_out = dx_out.ref;
    b.dx_predict = a.dx_predict;
    b.label_smoothing = a.label_smoothing;
    b.z_loss_scale = a.z_loss_scale;
    b.logit_softcap = a.logit_softcap;
    cross_entropy_train_bwd(b, nullptr);
    QUACK_CUDA_OK(cudaDeviceSynchronize());

    expect_word = g == 1.0 ? 1 : 0;
    EXPECT_EQ(read_word(word), expect_word) << "the backward sets the word to (g == 1)";
    EXPECT_EQ(download_bytes(state), st_bytes) << "the backward leaves the state";
    const DeviceTensor& res = c.out_of_place ? dx_out : dx;
    if (c.out_of_place) {
      EXPECT_EQ(download_bytes(dx), dx_after_fwd) << "dx_out given: dx untouched";
    } else if (written && g == 1.0) {
      EXPECT_EQ(download_bytes(dx), dx_after_fwd) << "written, grad_output 1: dx untouched";
    }
    std::vector<double> ref_dx = r.dx, terms = r.row_terms;
    for (double& v : ref_dx) v *= g;
    for (double& v : terms) v *= std::fabs(g);
    const std::vector<double> got = download(res);
    // Written then rescaled: the forward's rounding, then the product's (bf16: 2 roundings).
    const double rel = (written ? 2.0 : 1.0) * tolerance(c.x);
    EXPECT_TRUE(ce_close_rows("dx", got, ref_dx, M, V, rel, terms));
    for (int64_t i = 0; i < M; ++i) {
      if (r.state[i] != 1) continue;
      bool exact = true;
      for (int64_t j = 0; j < V; ++j) exact = exact && got[i * V + j] == 0.0;
      EXPECT_TRUE(exact) << "ignored row " << i << ": dx exactly 0";
    }
  }
}

// 1, 0.5, 0.5, 1, 0.5 from the initial word 1: written+1 (no pass), written+0.5 (rescale),
// not written+0.5 (recompute), not written+1 (recompute), written+0.5 (rescale).
const std::vector<double> kSteps = {1.0, 0.5, 0.5, 1.0, 0.5};

class CeTrain : public GpuTest {};

TEST_F(CeTrain, Sequences) {
  for (DType dt : {DType::kBFloat16, DType::kFloat32, DType::kFloat16}) {
    for (int64_t V : {4096, 1001}) {  // vector policy; a tail (general policy)
      for (Reduction red : {Reduction::kMean, Reduction::kSum}) {
        TrainCase c;
        c.x = dt;
        c.V = V;
        c.red = red;
        run_sequence(c, kSteps);
        TrainCase o = c;  // smoothing + z-loss
        o.eps = 0.1;
        o.zs = 1e-3;
        run_sequence(o, kSteps);
        o = c;  // class weights + z-loss ('mean': two denominators)
        o.weight = true;
        o.zs = 1e-2;
        run_sequence(o, kSteps);
        o = c;  // class weights with smoothing (the weighted-smoothing instances)
        o.weight = true;
        o.eps = 0.2;
        run_sequence(o, kSteps);
        o = c;  // softcap (fp16: general policy)
        o.cap = 20.0;
        run_sequence(o, kSteps);
      }
    }
  }
}

TEST_F(CeTrain, LongRows) {
  TrainCase c;  // ring policy (clusters) for the forward; the backward's long-row plan
  c.M = 5;
  c.V = 131072;
  run_sequence(c, kSteps);
  c.M = 3;
  c.V = 262144;
  c.zs = 1e-3;
  run_sequence(c, kSteps);
  c.V = 262150;  // a tail: general policy with clusters
  c.x = DType::kFloat32;
  run_sequence(c, {0.5, 1.0, 1.0, 0.5});
}

TEST_F(CeTrain, ForcedWord) {
  TrainCase c;
  c.M = 64;
  c.V = 2048;
  run_sequence(c, {0.5, 1.0, 1.0, 0.5, 0.25}, {0, 1, 0, 1, 0});
  c.red = Reduction::kSum;
  c.ignore_frac = 1.0;  // every row ignored: dx exactly 0 on every path
  run_sequence(c, {0.5, 1.0, 1.0, 0.5}, {0, 1, 0, 1});
}

// C10 on the training pair: out-of-range targets (bad_targets) through every step of kSteps,
// so their NaN loss and dx rows come from the forward (word 1: written, used or rescaled) and
// from the backward's recompute (word 0) alike; the other rows right, 'mean' over the counted
// rows only (a bad row counts in no denominator), ignored rows exactly 0 (run_sequence's
// checks against the reference, which gives bad rows NaN).
TEST_F(CeTrain, OutOfRangeTargets) {
  for (DType dt : {DType::kBFloat16, DType::kFloat32})
    for (int64_t V : {4096, 1001})  // vector policy; a tail (general policy)
      for (Reduction red : {Reduction::kMean, Reduction::kSum}) {
        TrainCase c;
        c.x = dt;
        c.V = V;
        c.red = red;
        c.bad_targets = true;
        run_sequence(c, kSteps);
        TrainCase o = c;  // class weights + z-loss ('mean': two denominators)
        o.weight = true;
        o.zs = 1e-2;
        run_sequence(o, kSteps);
      }
  TrainCase c;
  c.bad_targets = true;
  c.weight = true;  // class weights with smoothing: one kernel, dx stores gated by the word
  c.eps = 0.2;
  run_sequence(c, kSteps);
  c = TrainCase();
  c.bad_targets = true;
  c.inplace = true;  // dx = x: finite logits, not NaN poison, where a bad row must get NaN
  run_sequence(c, kSteps);
  c.inplace = false;
  c.M = 6;  // long rows (ring policy), no ignored rows
  c.V = 131072;
  c.ignore_frac = 0.0;
  run_sequence(c, kSteps);
}

TEST_F(CeTrain, InPlace) {
  TrainCase c;
  c.inplace = true;
  run_sequence(c, kSteps);
  c.x = DType::kFloat32;
  c.V = 1001;
  c.eps = 0.1;
  run_sequence(c, kSteps);
}

TEST_F(CeTrain, OutOfPlace) {
  TrainCase c;
  c.out_of_place = true;
  run_sequence(c, kSteps);
  c.inplace = true;  // the logits hold dx; dx_out its own
  c.zs = 1e-3;
  run_sequence(c, kSteps);
}

// The predicted forward's two kernels on every configuration of the skeleton's table (bf16;
// test_cross_entropy.cpp's config_rows, fewer): the forced kernel on the entry, the other on
// its own plan, with the word 0 and 1 (each kernel once open, once closed).
std::vector<std::pair<int64_t, int64_t>> gate_rows(int config) {
  const int64_t vec = 8;
  if (config == kRowConfigCount) return {{5, 4097}, {3, 70001}};
  const detail::RowConfig& k = kRowConfigs[config];
  const int64_t chunk = k.chunk_bytes() / 2;
  switch (k.policy) {
    case RowPolicy::kRegister:
      return {{2 * k.rows + 1, chunk}};
    case RowPolicy::kLooped:
      return {{3, 2 * chunk + chunk / 2 + vec}};
    case RowPolicy::kRing:
      return {{5, 3 * chunk - vec}, {3, 16 * chunk}};
    case RowPolicy::kClusterRegister:  // the persistent entry: rows reused per cluster too
      if (k.stages > 0) return {{300, chunk + vec}, {3, 16 * chunk}, {1500, 2 * chunk + vec}};
      return {{300, chunk + vec}, {3, 16 * chunk}};
    default:
      return {};
  }
}

// One forward (dx poisoned, the word set to `on`) with the given plans; checks loss and lse
// against the reference and dx (word 1) or its poison (word 0).
void check_gated_forward(const detail::CeFwdCall& call, const detail::CeFwdPlan& plan,
                         const ref::CeRef& r, const DeviceTensor& dx, const DeviceTensor& loss,
                         const DeviceTensor& lse, int on, int64_t M, int64_t V) {
  detail::run_cross_entropy_fwd(call, plan, nullptr);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  const double tol = tolerance(DType::kFloat32);
  const double got_loss = download(loss)[0];
  const double loss_tol = tol * std::fmax(std::fabs(r.loss), r.loss_terms) + 1e-30;
  if (std::isnan(r.loss)) EXPECT_TRUE(std::isnan(got_loss));
  else EXPECT_NEAR(got_loss, r.loss, loss_tol);
  EXPECT_TRUE(close("lse", download(lse), r.lse, tol, 0, 0.0));
  if (on) {
    EXPECT_TRUE(ce_close_rows("dx", download(dx), r.dx, M, V, tolerance(DType::kBFloat16),
                              r.row_terms));
  } else {
    EXPECT_TRUE(all_poison(dx)) << "word 0: dx untouched";
  }
}

TEST_F(CeTrain, ForcedConfigs) {
  int ran_loss = 0, ran_dx = 0;
  for (int cfg = 0; cfg <= kRowConfigCount; ++cfg) {
    const char* name = cfg < kRowConfigCount ? kRowConfigs[cfg].name : "general";
    // Compiled for the loss-only / loss + dx kernel (one bf16 stream, a 4-float reduction, no /
    // one output, the entries under trial)?
    const bool gen = cfg == kRowConfigCount;
    const bool use_loss =
        gen || detail::row_config_usable(kRowConfigs[cfg], 1, 4, 0, 2, 0, 4, -1, false, 0, true);
    const bool use_dx =
        gen || detail::row_config_usable(kRowConfigs[cfg], 1, 4, 0, 2, 0, 4, -1, false, 1, true);
    if (!use_loss && !use_dx) continue;
    for (const auto& [M, V] : gate_rows(cfg)) {
      // One draw, upload and reference per shape, read by every kernel and word below (each run
      // on its own poisoned outputs; the kernels only read x and the targets): the numbers do
      // not pick the path, the forced entry, the kernel and the word do.
      Rng rng(static_cast<uint64_t>(cfg * 31 + V));
      CeCase cc;
      cc.M = M;
      cc.V = V;
      const std::vector<int64_t> targets = ce_targets(rng, cc);
      DeviceTensor x = upload(random_values(rng, M * V, DType::kBFloat16, 0.0, 2.0),
                              DType::kBFloat16, M, V);
      const std::vector<double> xh = download(x);
      DeviceTensor tg = upload_targets(targets, DType::kInt64);
      ref::CeOptions o;
      const ref::CeRef r =
          ref::cross_entropy_ref(M, V, xh.data(), targets.data(), o, true, nullptr);
      // kernel 0: the loss-only one forced; 1: the loss + dx one; 2: the single-kernel form
      // (the dx instance with its stores gated) forced.
      for (int kernel : {0, 1, 2}) {
        if (kernel == 0 ? !use_loss : !use_dx) continue;
        for (int on : {0, 1}) {
          SCOPED_TRACE(std::string(name) + " M=" + std::to_string(M) + " V=" +
                       std::to_string(V) + " kernel " + std::to_string(kernel) + " word " +
                       std::to_string(on));
          DeviceTensor dx = alloc_tensor(DType::kBFloat16, M, V);
          DeviceTensor loss = alloc_vector(DType::kFloat32, 1);
          DeviceTensor lse = alloc_vector(DType::kFloat32, M);
          DeviceTensor state = alloc_vector(DType::kFloat32, kCrossEntropyDxStateFloats);
          DeviceBuffer word(4);
          write_word(word, on);
          CrossEntropyFwdArgs a;
          a.x = x.ref;
          a.target = tg.ref;
          a.loss = loss.ref;
          a.lse = lse.ref;
          a.dx = dx.ref;
          a.dx_state = state.ref;
          a.dx_predict = TensorRef::vector(word.get(), DType::kInt32, 1, 0, 1);
          const DeviceBuffer ws = attach_workspace(a);
          const detail::CeFwdCall call = detail::cross_entropy_fwd_call(
              a, kernel == 2 ? detail::CePredictedForm::kSingle : detail::CePredictedForm::kSplit);
          ASSERT_EQ(call.split, kernel != 2);
          const detail::CeFwdPlan plan = detail::plan_cross_entropy_fwd(
              call, kernel != 1 ? cfg : -1, kernel == 1 ? cfg : -1);
          const detail::RowPlan& forced = kernel == 1 ? plan.dx : plan.row;
          EXPECT_NE(forced.policy, RowPolicy::kNone)
              << "the forced configuration does not take it";
          if (kernel != 2) {
            EXPECT_NE((kernel == 1 ? plan.row : plan.dx).policy, RowPolicy::kNone)
                << "the other kernel's own plan";
          }
          if (forced.policy == RowPolicy::kNone) continue;
          (kernel == 0 ? ran_loss : ran_dx) += 1;
          check_gated_forward(call, plan, r, dx, loss, lse, on, M, V);
          EXPECT_EQ(download(state)[detail::ce::kDxOn], on ? 1.0 : 0.0);
        }
      }
    }
  }
  EXPECT_GT(ran_loss, 8) << "configurations that took a case (loss-only kernel)";
  EXPECT_GT(ran_dx, 8) << "configurations that took a case (loss + dx kernel)";
}

// The predicted pair against the separate calls it stands for, bitwise. Steps from the word
// 1: g 1 (written, used), 0.5 (written, rescaled), 0.5 (not written: the recompute), 1 (not
// written, recompute), 1 (written), 0.5 (written, rescaled), 1 (not written): every
// transition of the word, both kernels of the forward open after each. 'mean' without class
// weights (one denominator: the recompute's σ_ce = σ_z = g·the state's scale, which the
// reference passes as dloss; exact for g a power of 2).
struct PairCase {
  int64_t M, V;
  DType x = DType::kBFloat16;
  double cap = 0.0, zs = 0.0, eps = 0.0;
  Reduction red = Reduction::kMean;
};

std::string pair_name(const PairCase& c) {
  std::string s = "M=" + std::to_string(c.M) + " V=" + std::to_string(c.V) + " " +
                  short_name(c.x) + (c.red == Reduction::kMean ? " mean" : " sum");
  if (c.cap > 0) s += " cap=" + std::to_string(c.cap);
  if (c.zs > 0) s += " zs=" + std::to_string(c.zs);
  if (c.eps > 0) s += " eps=" + std::to_string(c.eps);
  return s;
}

// Targets of an (M, V) case in dtype x with a fifth of the rows ignored (ce_targets).
std::vector<int64_t> targets_fifth_ignored(Rng& rng, int64_t M, int64_t V, DType x) {
  CeCase cc;
  cc.M = M;
  cc.V = V;
  cc.x = x;
  cc.ignore_frac = 0.2;
  return ce_targets(rng, cc);
}

void run_pair_bitwise(const PairCase& c, const std::vector<double>& gs) {
  SCOPED_TRACE(pair_name(c));
  const int64_t M = c.M, V = c.V;
  Rng rng(static_cast<uint64_t>(M * 131 + V));
  const std::vector<int64_t> targets = targets_fifth_ignored(rng, M, V, c.x);
  DeviceTensor x = upload(random_values(rng, M * V, c.x, 0.0, 2.0), c.x, M, V);
  DeviceTensor tg = upload_targets(targets, DType::kInt64);
  DeviceBuffer word(4);
  write_word(word, 1);
  DeviceTensor state = alloc_vector(DType::kFloat32, kCrossEntropyDxStateFloats);
  auto fwd_args = [&](const DeviceTensor& loss, const DeviceTensor& lse) {
    CrossEntropyFwdArgs a;
    a.x = x.ref;
    a.target = tg.ref;
    a.loss = loss.ref;
    a.lse = lse.ref;
    a.reduction = c.red;
    a.label_smoothing = static_cast<float>(c.eps);
    a.z_loss_scale = static_cast<float>(c.zs);
    a.logit_softcap = static_cast<float>(c.cap);
    return a;
  };
  int split_on = 0, split_off = 0;
  for (size_t k = 0; k < gs.size(); ++k) {
    const double g = gs[k];
    const int32_t w = read_word(word);
    SCOPED_TRACE("step " + std::to_string(k) + " grad_output " + std::to_string(g) + " word " +
                 std::to_string(w));
    (w != 0 ? split_on : split_off) += 1;
    DeviceTensor go = upload_vector({g}, DType::kFloat32, 1);

    // The pair (poisoned outputs, workspace and state).
    DeviceTensor dx = alloc_tensor(c.x, M, V), loss = alloc_vector(DType::kFloat32, 1),
                 lse = alloc_vector(DType::kFloat32, M);
    state.poison();
    CrossEntropyFwdArgs a = fwd_args(loss, lse);
    a.dx = dx.ref;
    a.dx_state = state.ref;
    a.dx_predict = TensorRef::vector(word.get(), DType::kInt32, 1, 0, 1);
    const DeviceBuffer ws = attach_workspace(a);
    ASSERT_TRUE(detail::cross_entropy_fwd_call(a).split);
    cross_entropy_fwd(a, nullptr);
    CrossEntropyTrainBwdArgs b;
    b.x = x.ref;
    b.target = tg.ref;
    b.lse = lse.ref;
    b.grad_output = go.ref;
    b.dx = dx.ref;
    b.dx_state = state.ref;
    b.dx_predict = a.dx_predict;
    b.label_smoothing = a.label_smoothing;
    b.z_loss_scale = a.z_loss_scale;
    b.logit_softcap = a.logit_softcap;
    cross_entropy_train_bwd(b, nullptr);
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    EXPECT_EQ(read_word(word), g == 1.0 ? 1 : 0) << "the backward sets the word to (g == 1)";
    const std::vector<double> st = download(state);
    EXPECT_EQ(st[detail::ce::kDxOn], w != 0 ? 1.0 : 0.0) << "the state records the word";

    // The separate calls (their own poisoned outputs).
    DeviceTensor rdx = alloc_tensor(c.x, M, V), rloss = alloc_vector(DType::kFloat32, 1),
                 rlse = alloc_vector(DType::kFloat32, M);
    CrossEntropyFwdArgs ra = fwd_args(rloss, rlse);
    if (w != 0) ra.dx = rdx.ref;  // the forward with dx, no prediction (stores not gated)
    const DeviceBuffer rws = attach_workspace(ra);
    ASSERT_FALSE(detail::cross_entropy_fwd_call(ra).split);
    cross_entropy_fwd(ra, nullptr);
    if (w != 0) {
      if (g != 1.0) {
        CrossEntropyScaleGradArgs sa;
        sa.dx = rdx.ref;
        sa.grad_output = go.ref;
        cross_entropy_scale_grad(sa, nullptr);
      }
    } else {
      // σ = dloss: the training backward's g·kScaleCe (= g·kScaleZ without class weights).
      EXPECT_EQ(st[detail::ce::kScaleCe], st[detail::ce::kScaleZ]);
      const float dl = static_cast<float>(g) * static_cast<float>(st[detail::ce::kScaleCe]);
      DeviceTensor dloss = upload_vector({static_cast<double>(dl)}, DType::kFloat32, 1);
      CrossEntropyBwdArgs rb;
      rb.x = x.ref;
      rb.target = tg.ref;
      rb.lse = rlse.ref;
      rb.dloss = dloss.ref;
      rb.dx = rdx.ref;
      rb.label_smoothing = a.label_smoothing;
      rb.z_loss_scale = a.z_loss_scale;
      rb.logit_softcap = a.logit_softcap;
      cross_entropy_bwd(rb, nullptr);
    }
    QUACK_CUDA_OK(cudaDeviceSynchronize());
    const auto got_loss = download_bytes(loss);
    EXPECT_EQ(got_loss, download_bytes(rloss)) << "loss bits";
    EXPECT_EQ(download_bytes(lse), download_bytes(rlse)) << "lse bits";
    EXPECT_EQ(download_bytes(dx), download_bytes(rdx)) << "dx bits";
    EXPECT_FALSE(all_poison(dx)) << "dx written";
    EXPECT_TRUE(std::isfinite(download(loss)[0])) << "loss finite";
  }
  EXPECT_GT(split_on, 0) << "steps with the word 1";
  EXPECT_GT(split_off, 0) << "steps with the word 0";
}

TEST_F(CeTrain, PairBitwise) {
  // Word 1 → g 1, 0.5 → 0 → g 0.5, 1 → 1 → g 1, 0.5 → 0 → g 1 → 1 → g 0.5.
  const std::vector<double> steps = {1.0, 0.5, 0.5, 1.0, 1.0, 0.5, 1.0, 0.5};
  std::vector<PairCase> cases = {
      {8, 65536},          // cl-t256v8 for both kernels (rows of 128 KB)
      {37, 131072},        // cl-t256v8 for both kernels (clusters of 8)
      {4, 262144},         // the same at clusters of 16
      {64, 4096},          // t128v4 (8 KB rows)
      {600, 16384},        // t512v4: more row blocks than some grids, the gated loops
      {600, 32768},        // cl-t512v8 for both kernels (rows of (32, 64] KB)
      {64, 32000, DType::kBFloat16, 20.0},          // the same with a tail and the softcap
      {16, 8192, DType::kBFloat16, 20.0},           // softcap instances
      {9, 65536, DType::kFloat32, 0.0, 1e-3, 0.1},  // fp32 (the ring), z-loss, smoothing
      {33, 16384, DType::kFloat16},
      {21, 1000},          // short rows: several rows per CTA
  };
  PairCase sum_case{12, 65536};
  sum_case.red = Reduction::kSum;
  sum_case.zs = 1e-3;
  cases.push_back(sum_case);
  for (const PairCase& c : cases) run_pair_bitwise(c, steps);
}

// cl-t256v8-s1 and -s2 compute each row as cl-t256v8 does (the same slices, registers, fold, exchange,
// finish and stores; only where the row's bytes come from and when differ), so their results
// are cl-t256v8's bit for bit. Rows: more than the resident clusters (every persistent cluster
// loops over several rows) at clusters of 1, 2, 4, 8 and 16.
struct StageCase {
  int64_t M, V;
  DType x = DType::kBFloat16;
  double cap = 0.0, zs = 0.0, eps = 0.0;
  bool inplace = false;
};

TEST_F(CeTrain, StageEntryBitwise) {
  const int cl = detail::row_config_index("cl-t256v8");
  const int cls[2] = {detail::row_config_index("cl-t256v8-s1"),
                      detail::row_config_index("cl-t256v8-s2")};
  ASSERT_GE(cl, 0);
  ASSERT_GE(cls[0], 0);
  ASSERT_GE(cls[1], 0);
  std::vector<StageCase> cases = {
      {900, 8192},    // clusters of 1 (16 KB rows)
      {700, 16392},   // 2
      {700, 65536},   // 4
      {300, 131072},  // 8
      {120, 262144},  // 16
      {300, 65536, DType::kBFloat16, 20.0, 1e-3, 0.1},  // softcap, z-loss, label smoothing
      {300, 32768, DType::kFloat32},                    // 4 (fp32: 8192 elements per CTA)
      {300, 65536, DType::kFloat16},
  };
  StageCase inplace{300, 65536};
  inplace.inplace = true;
  cases.push_back(inplace);
  for (const StageCase& c : cases) {
    const int64_t M = c.M, V = c.V;
    SCOPED_TRACE("M=" + std::to_string(M) + " V=" + std::to_string(V) + " " + short_name(c.x) +
                 (c.cap > 0 ? " cap" : "") + (c.inplace ? " in place" : ""));
    Rng rng(static_cast<uint64_t>(M * 17 + V));
    const std::vector<int64_t> targets = targets_fifth_ignored(rng, M, V, c.x);
    const std::vector<double> xh = random_values(rng, M * V, c.x, 0.0, 2.0);
    DeviceTensor tg = upload_targets(targets, DType::kInt64);
    // x uploaded once for every entry and form (the kernels only read it), except in place,
    // where each run overwrites it with dx.
    DeviceTensor x_shared;
    if (!c.inplace) x_shared = upload(xh, c.x, M, V);
    for (bool split : {true, false}) {
      SCOPED_TRACE(split ? "predicted forward (split, word 1)" : "forward with dx ('sum')");
      std::vector<unsigned char> bits[3][3];  // [cl, -s1, -s2][loss, lse, dx]
      for (int e = 0; e < 3; ++e) {
        const int cfg = e == 0 ? cl : cls[e - 1];
        SCOPED_TRACE(detail::kRowConfigs[cfg].name);
        DeviceTensor x_own;
        if (c.inplace) x_own = upload(xh, c.x, M, V);
        const DeviceTensor& x = c.inplace ? x_own : x_shared;
        DeviceTensor dx = alloc_tensor(c.x, M, V);
        DeviceTensor loss = alloc_vector(DType::kFloat32, 1);
        DeviceTensor lse = alloc_vector(DType::kFloat32, M);
        DeviceTensor state = alloc_vector(DType::kFloat32, kCrossEntropyDxStateFloats);
        DeviceBuffer word(4);
        write_word(word, 1);
        CrossEntropyFwdArgs a;
        a.x = x.ref;
        a.target = tg.ref;
        a.loss = loss.ref;
        a.lse = lse.ref;
        a.dx = c.inplace ? x.ref : dx.ref;
        a.reduction = split ? Reduction::kMean : Reduction::kSum;
        a.label_smoothing = static_cast<float>(c.eps);
        a.z_loss_scale = static_cast<float>(c.zs);
        a.logit_softcap = static_cast<float>(c.cap);
        if (split) {
          a.dx_state = state.ref;
          a.dx_predict = TensorRef::vector(word.get(), DType::kInt32, 1, 0, 1);
        }
        const DeviceBuffer ws = attach_workspace(a);
        const detail::CeFwdCall call = detail::cross_entropy_fwd_call(a);
        ASSERT_EQ(call.split, split);
        const detail::CeFwdPlan plan = split ? detail::plan_cross_entropy_fwd(call, -1, cfg)
                                             : detail::plan_cross_entropy_fwd(call, cfg);
        const detail::RowPlan& forced = split ? plan.dx : plan.row;
        ASSERT_EQ(forced.config, cfg) << "the forced entry takes the call";
        detail::run_cross_entropy_fwd(call, plan, nullptr);
        QUACK_CUDA_OK(cudaDeviceSynchronize());
        bits[e][0] = download_bytes(loss);
        bits[e][1] = download_bytes(lse);
        bits[e][2] = download_bytes(c.inplace ? x : dx);
        if (!c.inplace) {
          EXPECT_FALSE(all_poison(bits[e][2])) << "dx written";
        }
        EXPECT_TRUE(std::isfinite(download(loss)[0])) << "loss finite";
      }
      for (int e = 1; e < 3; ++e) {
        SCOPED_TRACE(detail::kRowConfigs[cls[e - 1]].name);
        EXPECT_EQ(bits[0][0], bits[e][0]) << "loss bits";
        EXPECT_EQ(bits[0][1], bits[e][1]) << "lse bits";
        EXPECT_EQ(bits[0][2], bits[e][2]) << "dx bits";
      }
    }
  }
}

TEST_F(CeTrain, Empty) {
  DeviceTensor x = alloc_tensor(DType::kBFloat16, 0, 4096);
  DeviceTensor tg = alloc_vector(DType::kInt64, 0);
  DeviceTensor lse = alloc_vector(DType::kFloat32, 0);
  DeviceTensor state = alloc_vector(DType::kFloat32, kCrossEntropyDxStateFloats);
  DeviceTensor go = upload_vector({0.5}, DType::kFloat32, 1);
  DeviceBuffer word(4);
  write_word(word, 1);
  CrossEntropyTrainBwdArgs b;
  b.x = x.ref;
  b.target = tg.ref;
  b.lse = lse.ref;
  b.grad_output = go.ref;
  b.dx = x.ref;
  b.dx_state = state.ref;
  b.dx_predict = TensorRef::vector(word.get(), DType::kInt32, 1, 0, 1);
  cross_entropy_train_bwd(b, nullptr);
  QUACK_CUDA_OK(cudaDeviceSynchronize());
  EXPECT_EQ(read_word(word), 1) << "M = 0 launches nothing";
}

// SMs of the current device (0 without one).
int64_t sm_count() {
  int dev = 0, n = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return 0;
  if (cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) return 0;
  return n;
}

// The gated backward's register, looped and map kernels run at most the resident CTAs, each
// looping over row blocks or tiles (policy_register.cuh). Row blocks: 2 x (2048 threads per SM
// / the CTA's threads, at most 32) x SMs, twice an upper bound on the resident CTAs (every CTA
// takes at least two), plus a partial block; map tiles: 3 per row (the last half a tile and a
// vector) over (2048 / the CTA's threads) x SMs + 1 rows.
TEST_F(CeTrain, ManyRowBlocks) {
  const int64_t sms = sm_count();
  ASSERT_GT(sms, 0);
  TrainCase c;  // t512v4 (register policy, both forwards and the backward): ≤ 4 CTAs per SM
  c.M = 2 * sms * 4 + 3;
  c.V = 16384;
  run_sequence(c, kSteps);  // open at steps 2, 3 (g 0.5, 1); closed at 0, 1, 4 (4 after open)

  std::vector<CeCase> cases;
  int ran = 0, ran_map = 0;
  for (int cfg = 0; cfg < kRowConfigCount; ++cfg) {
    const detail::RowConfig& k = kRowConfigs[cfg];
    if (k.policy != RowPolicy::kRegister && k.policy != RowPolicy::kLooped &&
        k.policy != RowPolicy::kMap)
      continue;
    // Compiled for the backward (one bf16 stream, a 1-float reduction that it needs only with
    // weighted smoothing, one output)?
    if (!detail::row_config_usable(k, 1, 1, 0, 2, 0, 4, -1, false, 1, false, false, true))
      continue;
    const int64_t chunk = k.chunk_bytes() / 2;
    const int64_t per_sm = std::min<int64_t>(32, 2048 / k.threads());
    CeCase cc;
    cc.bwd = true;
    cc.x = DType::kBFloat16;
    cc.config = cfg;
    cc.eps = 0.1;  // the reduction in use
    cc.zs = 1e-4;
    cc.red = Reduction::kMean;
    cc.seed = 9100 + cfg;
    if (k.policy == RowPolicy::kRegister) {
      cc.M = 2 * sms * per_sm * k.rows + k.rows / 2 + 1;
      cc.V = chunk;
    } else if (k.policy == RowPolicy::kMap) {  // 3 tiles per row
      cc.M = sms * per_sm + 1;
      cc.V = 2 * chunk + chunk / 2 + 8;
    } else {  // 2.5 passes of the loop
      cc.M = 2 * sms * per_sm + 1;
      cc.V = 2 * chunk + chunk / 2 + 8;
    }
    cases.push_back(cc);
  }
  // One draw of logits for every entry (each case reads the first M·V; its targets and dloss
  // its own): the entries' shapes differ, the numbers need not.
  int64_t most = 0;
  for (const CeCase& cc : cases) most = std::max(most, cc.M * cc.V);
  Rng rng(9100);
  const std::vector<double> logits = random_values(rng, most, DType::kBFloat16, 0.0, 2.0);
  for (CeCase cc : cases) {
    cc.logits = &logits;
    cc.sample_rows = true;  // dx compared on ~4M elements of each, the rest checked finite / 0
    run_ce_case(cc);
    ++ran;
    if (kRowConfigs[cc.config].policy == RowPolicy::kMap) ++ran_map;
  }
  EXPECT_GT(ran, 4) << "register and looped configurations compiled for the backward";
  EXPECT_EQ(ran_map, 1) << "the map configuration compiled for the backward";
}

}  // namespace
}  // namespace quack::test
