"""Counters of the fp32 fix-up's branches in the emulated bitonic kernel (emu_stats, printed by
the harness: each branch must be taken), for prepare_tree.py's EXTRA."""
EXTRA = {
    "src/topk/topk_bitonic_kernel.cuh": [
        ("  if (rev ? max_out < min_in : max_out <= min_in) return;",
         "  ++emu_stats[0];\n  if (rev ? max_out < min_in : max_out <= min_in) return;\n  ++emu_stats[1];"),
        # both finish paths (the T-constant one and the loop) rank a store by this line
        ("    const int pos = tie ? topk_tie_rank_f32(xrow, top, k, m, e, v, flip) : ",
         "    emu_stats[2] += tie;\n    const int pos = tie ? topk_tie_rank_f32(xrow, top, k, m, e, v, flip) : "),
        # device-only asm of the fit instances: the entry's LOP3, fresh %tid / %laneid / %ctaid
        ('asm("lop3.b32 %0, %1, %2, %3, 0xe6;" : "=r"(e) : "r"(key), "r"(r), "r"(q));',
         "e = (key & r & q) | (r ^ q);"),
        ('asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));', "t = threadIdx.x;"),
        ('asm volatile("mov.u32 %0, %%laneid;" : "=r"(l));', "l = threadIdx.x & 31u;"),
        ('asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(c));', "c = blockIdx.x;"),
        ("namespace quack::detail {", "namespace quack::detail {\ninline long emu_stats[3];"),
    ],
}
