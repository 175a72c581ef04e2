# The row ops' instance list (DESIGN §2, "Instances"): one line per op and direction. Adding a
# row op is its traits file, its API file, and a line here (docs/architecture.md, "The row
# skeleton"). cmake/QuackRowOps.cmake turns each line into the op's TUs (one per input dtype)
# and its entry row_op_<name>().
#
#            name             traits header                   traits type     vector-path pairs (inputs:outputs)
quack_row_op(softmax_fwd      softmax/softmax_traits.cuh      SoftmaxFwd      bf16:bf16 bf16:f32 f16:f16 f16:f32 f32:f32)
quack_row_op(softmax_bwd      softmax/softmax_traits.cuh      SoftmaxBwd      bf16:bf16 f16:f16 f32:f32 f32:bf16 f32:f16)
quack_row_op(log_softmax_fwd  softmax/log_softmax_traits.cuh  LogSoftmaxFwd   bf16:bf16 bf16:f32 f16:f16 f16:f32 f32:f32)
quack_row_op(log_softmax_bwd  softmax/log_softmax_traits.cuh  LogSoftmaxBwd   bf16:bf16 f16:f16 f32:f32 f32:bf16 f32:f16)
quack_row_ops_finish()
