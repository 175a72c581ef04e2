// Definitions of the row skeleton's launchers: plan.config (run time) -> the compiled kernel of
// that configuration (compile time), once per (op, dtype pair); one dispatch function template,
// no macros. Configurations row_config_usable rejects for the op are not compiled.
// (launch_row_general is defined with its kernel, policy_general.cuh.)
#pragma once

#include <algorithm>
#include <string>
#include <utility>

#include "common/launch.h"
#include "quack/errors.h"
#include "row/policy_general.cuh"
#include "row/policy_register.cuh"
#include "row/policy_ring.cuh"
#include "row/row_launch.h"

namespace quack::detail {

template <class Op, typename TIn>
constexpr bool row_usable(const RowConfig& c) {
  return row_config_usable(c, Op::kIn, Op::Red::kFloats, Op::kCols, int{sizeof(TIn)});
}

template <class Op, typename TIn, typename TOut, size_t kConfig>
void launch_row_config(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                       const char* where) {
  constexpr RowConfig c = kRowConfigs[kConfig];
  if constexpr (!row_usable<Op, TIn>(c)) {
    throw InvalidArgument(std::string(where) + ": internal error: configuration " + c.name +
                          " is not compiled for this op");
  } else if constexpr (c.policy == RowPolicy::kRegister) {
    launch(row_register_kernel<Op, TIn, TOut, c.tpr, c.rows, c.vecs>, plan.grid, c.threads(), 0,
           1, stream, where, p);
  } else if constexpr (c.policy == RowPolicy::kLooped) {
    launch(row_looped_kernel<Op, TIn, TOut, c.tpr, c.vecs>, plan.grid, c.tpr, 0, 1, stream, where,
           p);
  } else if constexpr (c.policy == RowPolicy::kRing) {
    constexpr auto kernel = row_ring_kernel<Op, TIn, TOut, c.tpr, c.vecs, c.stages>;
    constexpr size_t smem = RingSmem<Op::kIn, c.tpr, c.vecs, c.stages, Op::Red::kFloats>::kBytes;
    static_assert(static_cast<int64_t>(smem) ==
                      row_ring_smem_bytes(c, Op::kIn, Op::Red::kFloats),
                  "the plan's and the kernel's shared-memory layouts agree");
    // Persistent: as many clusters as are resident at once, at most one per row.
    const int64_t clusters = std::min<int64_t>(
        p.g.rows, max_resident(reinterpret_cast<const void*>(kernel), c.tpr, smem,
                               plan.cluster_n, device, where));
    launch(kernel, clusters * plan.cluster_n, c.tpr, smem, plan.cluster_n, stream, where, p);
  }
}

template <class Op, typename TIn, typename TOut, size_t... kConfigs>
void launch_row_configs(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                        const char* where, std::index_sequence<kConfigs...>) {
  ((plan.config == static_cast<int>(kConfigs)
        ? launch_row_config<Op, TIn, TOut, kConfigs>(plan, p, device, stream, where)
        : void()),
   ...);
}

template <class Op, typename TIn, typename TOut>
void launch_row_vector(const RowPlan& plan, const RowParams& p, int device, cudaStream_t stream,
                       const char* where) {
  launch_row_configs<Op, TIn, TOut>(plan, p, device, stream, where,
                                    std::make_index_sequence<kRowConfigCount>{});
}

}  // namespace quack::detail
