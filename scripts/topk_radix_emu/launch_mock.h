// common/launch.h for the emulation (run.sh): launch() runs every CTA of the grid in turn.
#pragma once
#include <cstring>
#include "cuda_mock.h"
#include "quack/errors.h"
namespace quack::detail {
extern unsigned char topk_smem[];
extern size_t g_smem_limit;
template <typename T> struct NoDeduce { using type = T; };
template <typename... Args>
void launch(void (*kernel)(Args...), int64_t grid, int block, size_t smem, int cluster_n,
            cudaStream_t, const char* where, typename NoDeduce<Args>::type... args) {
  if (smem > g_smem_limit || cluster_n != 1 || block > 1024 || block % 32 != 0)
    throw InvalidArgument(std::string(where) + ": emu: bad launch");
  ::emu::st().grid = static_cast<unsigned>(grid);
  for (int64_t b = 0; b < grid; ++b) {
    std::memset(topk_smem, 0xcd, g_smem_limit);  // poison: reads before writes show
    ::emu::run_cta(static_cast<unsigned>(b), static_cast<unsigned>(block), [&] { kernel(args...); });
  }
}
}  // namespace quack::detail
