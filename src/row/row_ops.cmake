# The row ops' instance list (DESIGN §2, "Instances"): one line per op and direction. Adding a
# row op's kernels is its traits file, its API function, and a line here per direction
# (docs/architecture.md, "Adding a row op"). cmake/QuackRowOps.cmake turns each line into the
# op's TUs (one per input dtype) and its entry row_op_<name>(); a line without pairs is an op on
# the general policy only.
#
# Dtypes per instance: <inputs>:<outputs>[:<vectors>], each of <inputs> and <outputs> one dtype
# for every stream or a comma list per stream (the last repeated); the first listed instance
# that matches a call's present operands runs it.
#
#            name             traits header                   traits type     vector-path dtypes (inputs:outputs[:vectors])
quack_row_op(softmax_fwd      softmax/softmax_traits.cuh      SoftmaxFwd      bf16:bf16 bf16:f32 f16:f16 f16:f32 f32:f32)
quack_row_op(softmax_bwd      softmax/softmax_traits.cuh      SoftmaxBwd      bf16:bf16 f16:f16 f32:f32 f32:bf16 f32:f16)
quack_row_op(log_softmax_fwd  softmax/log_softmax_traits.cuh  LogSoftmaxFwd   bf16:bf16 bf16:f32 f16:f16 f16:f32 f32:f32)
quack_row_op(log_softmax_bwd  softmax/log_softmax_traits.cuh  LogSoftmaxBwd   bf16:bf16 f16:f16 f32:f32 f32:bf16 f32:f16)
# LayerNorm: as RMSNorm's lines, the fp32 residual stream's instances after the all-x ones
# (forward: residual_out fp32 with or without a residual; backward: h, dresidual_out and
# dresidual fp32 beside 16-bit dy and dx). Backward: h, dy -> dx (plain), and h, dy,
# dresidual_out -> dx, dresidual (also the fp32 residual stream's without the residual
# gradients).
quack_row_op(layernorm_fwd     norm/layernorm_traits.cuh       LayerNormFwd
             bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32
             bf16:bf16,f32:f32 bf16:bf16,f32:bf16 f16:f16,f32:f32 f16:f16,f32:f16)
quack_row_op(layernorm_fwd_res norm/layernorm_traits.cuh       LayerNormFwdRes
             bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32
             bf16,f32:bf16,f32:f32 bf16,f32:bf16,f32:bf16 f16,f32:f16,f32:f32 f16,f32:f16,f32:f16)
quack_row_op(layernorm_bwd     norm/layernorm_traits.cuh       LayerNormBwd
             bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32)
quack_row_op(layernorm_bwd_res norm/layernorm_traits.cuh       LayerNormBwdRes
             bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32
             f32,bf16,f32:bf16,f32:f32 f32,bf16,f32:bf16,f32:bf16
             f32,f16,f32:f16,f32:f32 f32,f16,f32:f16,f32:f16)
# RMSNorm (DESIGN §4's fast path: weight and bias in x's dtype or fp32, the residual stream and
# the output in x's dtype or fp32). Forward: x -> y, and x, residual -> y, residual_out (the
# residual stream; either may be absent: residual_out alone copies x, the first layer's); the
# instances with an fp32 residual stream follow the all-x ones. Backward: x (h), dy -> dx
# (plain), and x, dy, dresidual_out -> dx, dresidual (with dbias: always this one); the mixed
# instance is the prenorm backward with an fp32 residual stream (h, dresidual_out and dresidual
# fp32, dy and dx in the activations' dtype; also taken without the residual gradients).
quack_row_op(rmsnorm_fwd       norm/rmsnorm_traits.cuh RmsNormFwd
             bf16:bf16:f32 bf16:bf16:bf16 f16:f16:f32 f16:f16:f16 f32:f32:f32)
quack_row_op(rmsnorm_fwd_res   norm/rmsnorm_traits.cuh RmsNormFwdRes
             bf16:bf16:f32 bf16:bf16:bf16 bf16,f32:bf16,f32:f32 bf16,f32:bf16,f32:bf16
             f16:f16:f32 f16:f16:f16 f16,f32:f16,f32:f32 f16,f32:f16,f32:f16 f32:f32:f32)
quack_row_op(rmsnorm_fwd_bias     norm/rmsnorm_traits.cuh RmsNormFwdBias
             bf16:bf16:f32 bf16:bf16:bf16 f16:f16:f32 f16:f16:f16 f32:f32:f32)
quack_row_op(rmsnorm_fwd_res_bias norm/rmsnorm_traits.cuh RmsNormFwdResBias
             bf16:bf16:f32 bf16:bf16:bf16 f16:f16:f32 f16:f16:f16 f32:f32:f32)
quack_row_op(rmsnorm_bwd       norm/rmsnorm_traits.cuh RmsNormBwd
             bf16:bf16:f32 bf16:bf16:bf16 f16:f16:f32 f16:f16:f16 f32:f32:f32)
quack_row_op(rmsnorm_bwd_res   norm/rmsnorm_traits.cuh RmsNormBwdRes
             bf16:bf16:f32 bf16:bf16:bf16 f32,bf16,f32:bf16,f32:f32 f32,bf16,f32:bf16,f32:bf16
             f16:f16:f32 f16:f16:f16 f32,f16,f32:f16,f32:f32 f32,f16,f32:f16,f32:f16 f32:f32:f32)
quack_row_op(rmsnorm_bwd_dbias norm/rmsnorm_traits.cuh RmsNormBwdDbias
             bf16:bf16:f32 bf16:bf16:bf16 f32,bf16,f32:bf16,f32:f32 f32,bf16,f32:bf16,f32:bf16
             f16:f16:f32 f16:f16:f16 f32,f16,f32:f16,f32:f32 f32,f16,f32:f16,f32:f16 f32:f32:f32)
# Cross-entropy: loss (+ lse, z part), loss + dx (the gradient in the forward), dx from lse; the
# softcap variants are their own instances (tanh per element), for bf16 and fp32 logits; the
# weighted-smoothing variants (class weights with ε > 0) run on the general policy only; the
# split ones are the predicted training forward's two kernels (loss only where the dx word is 0,
# loss + dx where it is not: a kernel gate each).
quack_row_op(cross_entropy_fwd             cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLoss       bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_fwd_cap         cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLossCap    bf16:bf16 f32:f32)
quack_row_op(cross_entropy_fwd_grad        cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGrad       bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_fwd_grad_cap    cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGradCap    bf16:bf16 f32:f32)
quack_row_op(cross_entropy_fwd_ws          cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLossWS)
quack_row_op(cross_entropy_fwd_cap_ws      cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLossCapWS)
quack_row_op(cross_entropy_fwd_grad_ws     cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGradWS)
quack_row_op(cross_entropy_fwd_grad_cap_ws cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGradCapWS)
quack_row_op(cross_entropy_fwd_split_loss     cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdSplitLoss     bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_fwd_split_loss_cap cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdSplitLossCap  bf16:bf16 f32:f32)
quack_row_op(cross_entropy_fwd_split_grad     cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdSplitGrad     bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_fwd_split_grad_cap cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdSplitGradCap  bf16:bf16 f32:f32)
quack_row_op(cross_entropy_bwd             cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdPlain      bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_bwd_cap         cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdCap        bf16:bf16 f32:f32)
quack_row_op(cross_entropy_bwd_ws          cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdWS)
quack_row_op(cross_entropy_bwd_cap_ws      cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdCapWS)
quack_row_ops_finish()
