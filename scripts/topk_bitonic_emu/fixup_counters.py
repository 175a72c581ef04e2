"""Counters of the fp32 fix-up's branches in the emulated bitonic kernel (emu_stats, printed by
the harness: each branch must be taken), for prepare_tree.py's EXTRA."""
EXTRA = {
    "src/topk/topk_bitonic_kernel.cuh": [
        ("  if (max_out <= min_in) return;",
         "  ++emu_stats[0];\n  if (max_out <= min_in) return;\n  ++emu_stats[1];"),
        ("    if (tie) {", "    if (tie) {\n      ++emu_stats[2];"),
        ("namespace quack::detail {", "namespace quack::detail {\ninline long emu_stats[3];"),
    ],
}
