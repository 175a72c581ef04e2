// One compiled GEMM kernel instance (host only): what the dispatch of src/gemm/gemm.cpp matches a
// problem against. The table of all of them, kGemmInstances, and the launchers' declarations are
// generated from src/gemm/sm90/instances.txt into gemm/gemm_instances.h (in the build tree) by
// cmake/QuackGemmInstances.cmake.
#pragma once

#include "gemm/gemm_problem.h"
#include "quack/tensor.h"

namespace quack::detail {

struct GemmInstance {
  const char* name;       // the launcher, e.g. "gemm_sm90_128x256_bf16_bf16_kk"
  const char* tile;       // the name's tile part ("128x256", "128x128pp", "128x64c1", "128x64c1x2", "64x128"):
                          // the autotuner's candidate name
  GemmEpilogue epilogue;  // the visitor
  DType ab, d, c, d1;     // A/B, output 0, C (d's unless the instance reads a C of another dtype),
                          // output 1 (d's when the epilogue has one output)
  GemmMajor a, b;         // operand majors in the kernel's terms
  int bm, bn, cluster_m, cluster_n;
  bool pingpong;          // pingpong consumers, else cooperative
  bool candidate;         // a device A/B candidate (instances_ab.txt, A/B builds only): runs only when
                          // forced by its tile name; never the tile rule's pick nor a group's base
  bool diagnostic;        // a diagnostic A/B tile ("...diag<M>": wrong results by design): never tuned
  bool c_ring;            // C loaded ahead through a ring of C buffers (the tile's a<S>, S ≥ 1):
                          // the rule offers it only for problems that read C
  bool io_warps;          // I/O warps issue C's loads and the output stores (the tile's io): the
                          // rule takes it for its tile at K ≤ kIoWarpMaxK only (tile_rule.h)
  GemmLauncher run;
};

}  // namespace quack::detail
