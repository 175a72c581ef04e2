// Definitions of the row skeleton's launchers: plan.config (run time) -> the compiled kernel of
// that configuration (compile time), once per (op, instance dtypes); one dispatch function
// template, no macros. Configurations row_config_usable rejects for the op are not compiled.
// (launch_row_general is defined with its kernel, policy_general.cuh.)
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "common/launch.h"
#include "quack/errors.h"
#include "row/policy_general.cuh"
#include "row/policy_cluster_register.cuh"
#include "row/policy_register.cuh"
#include "row/policy_ring.cuh"
#include "row/policy_staged.cuh"
#include "row/row_launch.h"

namespace quack::detail {

template <class Op, class D>
constexpr bool row_usable(const RowConfig& c) {
  return row_config_usable(c, Op::kIn, Op::Red::kFloats, Op::kCols, row_in_elt<D, Op::kIn>(),
                           Op::kAcc, int{sizeof(typename D::Vec)}, row_in_words<D, Op::kIn>(),
                           Op::kLateCols, Op::kOut, Op::kTrialConfigs, Op::kColsAtApply,
                           Op::kNoReduce, Op::kHeldFold);
}

/// A persistent kernel's clusters: plan.grid / cluster_n when the plan has them (ops with column
/// accumulations: fixed by the workspace query), else the resident clusters, at most one per
/// row block.
inline int64_t row_persistent_clusters(const RowPlan& plan, const void* kernel, int threads,
                                       size_t smem, int device, const char* where,
                                       int64_t* resident) {
  if (resident != nullptr) {
    *resident = max_resident(kernel, threads, smem, plan.cluster_n, device, where);
    return 0;
  }
  if (plan.grid > 0) return plan.grid / plan.cluster_n;
  return std::min<int64_t>(plan.g.row_blocks,
                           max_resident(kernel, threads, smem, plan.cluster_n, device, where));
}

/// The grid of a register, looped or map kernel: plan.grid (one CTA per row block or tile), or
/// for ops with kGate == RowGate::kKernel at most the CTAs resident at once, which loop over the
/// row blocks or tiles (policy_register.cuh): where the gate is closed the launch is one wave
/// of CTAs that return.
template <class Op, class Kernel>
int64_t row_gated_grid(const RowPlan& plan, Kernel kernel, int threads, int device,
                       const char* where) {
  if constexpr (Op::kGate == RowGate::kKernel) {
    if (plan.grid <= 0) return plan.grid;
    return std::min<int64_t>(
        plan.grid, max_resident(reinterpret_cast<const void*>(kernel), threads, 0, 1, device,
                                where));
  } else {
    return plan.grid;
  }
}

template <class Op, class D, size_t kConfig>
void launch_row_config(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                       const char* where, int64_t* resident) {
  constexpr RowConfig c = kRowConfigs[kConfig];
  constexpr int kWords = row_in_words<D, Op::kIn>();
  if constexpr (!row_usable<Op, D>(c)) {
    throw InvalidArgument(std::string(where) + ": internal error: configuration " + c.name +
                          " is not compiled for this op");
  } else if constexpr (c.policy == RowPolicy::kRegister) {
    if (resident) throw InvalidArgument(std::string(where) + ": internal error: not persistent");
    constexpr auto kernel = row_register_kernel<Op, D, c.tpr, c.rows, c.vecs>;
    launch(kernel, row_gated_grid<Op>(plan, kernel, c.threads(), device, where), c.threads(), 0,
           1, stream, where, p);
  } else if constexpr (c.policy == RowPolicy::kLooped) {
    if (resident) throw InvalidArgument(std::string(where) + ": internal error: not persistent");
    constexpr auto kernel = row_looped_kernel<Op, D, c.tpr, c.vecs>;
    launch(kernel, row_gated_grid<Op>(plan, kernel, c.tpr, device, where), c.tpr, 0, 1, stream,
           where, p);
  } else if constexpr (c.policy == RowPolicy::kMap) {
    if (resident) throw InvalidArgument(std::string(where) + ": internal error: not persistent");
    constexpr auto kernel = row_map_kernel<Op, D, c.tpr, c.vecs>;
    launch(kernel, row_gated_grid<Op>(plan, kernel, c.tpr, device, where), c.tpr, 0, 1, stream,
           where, p);
  } else if constexpr (c.policy == RowPolicy::kRing) {
    constexpr auto kernel = row_ring_kernel<Op, D, c.tpr, c.vecs, c.stages, c.early_refill>;
    constexpr size_t smem = RingSmem<kWords, c.tpr, c.vecs, c.stages, Op::Red::kFloats>::kBytes;
    static_assert(static_cast<int64_t>(smem) == row_ring_smem_bytes(c, kWords, Op::Red::kFloats),
                  "the plan's and the kernel's shared-memory layouts agree");
    // Persistent: as many clusters as are resident at once, at most one per row.
    const int64_t clusters = row_persistent_clusters(
        plan, reinterpret_cast<const void*>(kernel), c.tpr, smem, device, where, resident);
    if (resident) return;
    launch(kernel, clusters * plan.cluster_n, c.tpr, smem, plan.cluster_n, stream, where, p);
  } else if constexpr (c.policy == RowPolicy::kClusterRegister && c.stages > 0) {
    constexpr auto kernel = row_cluster_register_prefetch_kernel<Op, D, c.tpr, c.vecs, c.stages>;
    constexpr size_t smem = RingSmem<kWords, c.tpr, c.vecs, c.stages, Op::Red::kFloats>::kBytes;
    static_assert(static_cast<int64_t>(smem) == row_ring_smem_bytes(c, kWords, Op::Red::kFloats),
                  "the plan's and the kernel's shared-memory layouts agree");
    // Persistent: as many clusters as are resident at once, at most one per row.
    const int64_t clusters = row_persistent_clusters(
        plan, reinterpret_cast<const void*>(kernel), c.tpr, smem, device, where, resident);
    if (resident) return;
    launch(kernel, clusters * plan.cluster_n, c.tpr, smem, plan.cluster_n, stream, where, p);
  } else if constexpr (c.policy == RowPolicy::kClusterRegister) {
    if (resident) throw InvalidArgument(std::string(where) + ": internal error: not persistent");
    launch(row_cluster_register_kernel<Op, D, c.tpr, c.vecs, c.held>, plan.grid, c.tpr, 0,
           plan.cluster_n, stream, where, p);
  } else if constexpr (c.policy == RowPolicy::kStaged) {
    constexpr auto kernel = row_staged_kernel<Op, D, c.vecs, c.stages, c.tpr, c.row_ahead>;
    // The plan's shared memory is row_staged_smem_bytes; the kernel's layout is RowPipeline's.
    int elt[Op::kIn];
    for (int s = 0; s < Op::kIn; ++s) elt[s] = 0;
    row_for_host<Op::kIn>([&](auto S) {
      constexpr int s = decltype(S)::value;
      elt[s] = !row_in_optional<Op>(s) || p.in[s].ptr != nullptr ? int{sizeof(row_in_t<D, s>)}
                                                                  : 0;
    });
    int vbytes[row_dim(Op::kCols)];
    for (int v = 0; v < row_dim(Op::kCols); ++v) vbytes[v] = Op::kCols > 0 ? 4 : 0;
    const int64_t bytes =
        row_reduce_smem_bytes(plan.g.reduce_slots(), plan.g.cluster_n, Op::Red::kFloats) +
        RowPipeline<Op::kIn, row_dim(Op::kCols), c.stages>::bytes(plan.g, elt, vbytes);
    if (bytes != static_cast<int64_t>(plan.smem) || plan.g.vpt > c.vecs ||
        plan.g.cta_threads > c.threads())
      throw InvalidArgument(std::string(where) + ": internal error: the staged plan (" +
                            std::to_string(plan.smem) + " bytes, " + std::to_string(plan.g.vpt) +
                            " vectors per thread) does not match its kernel (" +
                            std::to_string(bytes) + " bytes)");
    const int64_t clusters =
        row_persistent_clusters(plan, reinterpret_cast<const void*>(kernel),
                                plan.g.cta_threads, plan.smem, device, where, resident);
    if (resident) return;
    launch(kernel, clusters * plan.cluster_n, plan.g.cta_threads, plan.smem, plan.cluster_n,
           stream, where, p);
  }
}

template <class Op, class D, size_t... kConfigs>
void launch_row_configs(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                        const char* where, int64_t* resident, std::index_sequence<kConfigs...>) {
  ((plan.config == static_cast<int>(kConfigs)
        ? launch_row_config<Op, D, kConfigs>(plan, p, device, stream, where, resident)
        : void()),
   ...);
}

template <class Op, class D>
void launch_row_vector(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                       const char* where, int64_t* resident) {
  launch_row_configs<Op, D>(plan, p, device, stream, where, resident,
                            std::make_index_sequence<kRowConfigCount>{});
}

}  // namespace quack::detail
