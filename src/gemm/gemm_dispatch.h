// Which compiled kernel instance a gemm call launches (host only, no CUDA call): for host tests
// and traces of the dispatch of src/gemm/gemm.cpp without a GPU.
#pragma once

#include <cstdint>

#include "quack/gemm.h"
#include "quack/gemm_act.h"

namespace quack::detail {

/// Name of the kernel instance (gemm/gemm_instances.h, e.g. "gemm_sm90_128x192pp_bf16_bf16_km")
/// that quack::gemm(args) launches with args.tuned off on a device of `sms` SMs: the base instance
/// of args' dtypes and layouts (a column-major d swaps a and b: the kernel computes Dᵀ = Bᵀ·Aᵀ),
/// then the tile that QUACK_GEMM_TILE / QUACK_GEMM_TILE_N force (a tile not compiled for those
/// dtypes and layouts: the base instance; "<name part>:<tile>" forces it only where the base
/// instance's name contains <name part>) or, unset, empty or "auto", the tile rule of
/// gemm/tile_rule.h for `sms` (which never picks a buffer-split A/B variant). nullptr when nothing runs a GEMM kernel (M, N or L = 0; K = 0: the
/// fill kernel). Throws InvalidArgument as can_implement(args).
const char* gemm_instance_name(const GemmArgs& args, int64_t sms);

/// The same for quack::gemm_act(args) and quack::gemm_dact(args) with args.tuned off (e.g.
/// "gemm_act_sm90_128x192pp_bf16_bf16_kk").
const char* gemm_instance_name(const GemmActArgs& args, int64_t sms);
const char* gemm_instance_name(const GemmDActArgs& args, int64_t sms);

/// The same for quack::gemm_gated(args) with args.tuned off (e.g.
/// "gemm_gated_sm90_128x192pp_bf16_bf16_kk").
const char* gemm_instance_name(const GemmGatedArgs& args, int64_t sms);

/// The same for quack::gemm_dgated(args) with args.tuned off (e.g.
/// "gemm_dgated_sm90_128x128ppa3d2io_bf16_x2_pbf16_km").
const char* gemm_instance_name(const GemmDGatedArgs& args, int64_t sms);

}  // namespace quack::detail
