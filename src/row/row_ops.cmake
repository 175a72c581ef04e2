# The row ops' instance list (DESIGN §2, "Instances"): one line per op and direction. Adding a
# row op is its traits file, its API file, and a line here (docs/architecture.md, "The row
# skeleton"). cmake/QuackRowOps.cmake turns each line into the op's TUs (one per input dtype)
# and its entry row_op_<name>(); a line without pairs is an op on the general policy only.
#
#            name             traits header                   traits type     vector-path dtypes (inputs:outputs[:vectors])
quack_row_op(softmax_fwd      softmax/softmax_traits.cuh      SoftmaxFwd      bf16:bf16 bf16:f32 f16:f16 f16:f32 f32:f32)
quack_row_op(softmax_bwd      softmax/softmax_traits.cuh      SoftmaxBwd      bf16:bf16 f16:f16 f32:f32 f32:bf16 f32:f16)
quack_row_op(log_softmax_fwd  softmax/log_softmax_traits.cuh  LogSoftmaxFwd   bf16:bf16 bf16:f32 f16:f16 f16:f32 f32:f32)
quack_row_op(log_softmax_bwd  softmax/log_softmax_traits.cuh  LogSoftmaxBwd   bf16:bf16 f16:f16 f32:f32 f32:bf16 f32:f16)
quack_row_op(layernorm_fwd     norm/layernorm_traits.cuh       LayerNormFwd    bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32)
quack_row_op(layernorm_fwd_res norm/layernorm_traits.cuh       LayerNormFwdRes bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32)
quack_row_op(layernorm_bwd     norm/layernorm_traits.cuh       LayerNormBwd    bf16:bf16:bf16 bf16:bf16:f32 f16:f16:f16 f16:f16:f32 f32:f32:f32)
# Cross-entropy: loss (+ lse, z part), loss + dx (the gradient in the forward), dx from lse; the
# softcap variants are their own instances (tanh per element), for bf16 and fp32 logits; the
# weighted-smoothing variants (class weights with ε > 0) run on the general policy only.
quack_row_op(cross_entropy_fwd             cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLoss       bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_fwd_cap         cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLossCap    bf16:bf16 f32:f32)
quack_row_op(cross_entropy_fwd_grad        cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGrad       bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_fwd_grad_cap    cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGradCap    bf16:bf16 f32:f32)
quack_row_op(cross_entropy_fwd_ws          cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLossWS)
quack_row_op(cross_entropy_fwd_cap_ws      cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdLossCapWS)
quack_row_op(cross_entropy_fwd_grad_ws     cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGradWS)
quack_row_op(cross_entropy_fwd_grad_cap_ws cross_entropy/cross_entropy_traits.cuh  CrossEntropyFwdGradCapWS)
quack_row_op(cross_entropy_bwd             cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdPlain      bf16:bf16 f16:f16 f32:f32)
quack_row_op(cross_entropy_bwd_cap         cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdCap        bf16:bf16 f32:f32)
quack_row_op(cross_entropy_bwd_ws          cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdWS)
quack_row_op(cross_entropy_bwd_cap_ws      cross_entropy/cross_entropy_traits.cuh  CrossEntropyBwdCapWS)
quack_row_ops_finish()
