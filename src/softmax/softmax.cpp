// Softmax and log_softmax public API (quack/softmax.h): validation at the boundary, then the
// row skeleton's plan and launch (host only).
#include "common/check.h"
#include "quack/softmax.h"
#include "row/row_op.h"
#include "row_gen/row_ops.h"
#include "softmax/softmax_internal.h"

namespace quack {

namespace detail {

RowCall softmax_fwd_call(const SoftmaxFwdArgs& a, bool log) {
  const char* fn = log ? "log_softmax_fwd" : "softmax_fwd";
  const ArgCheck chk(fn);
  chk.matrix(a.x, "x", -1, -1);
  chk.float_dtype(a.x, "x");
  const int64_t M = a.x.shape[0], N = a.x.shape[1];
  row_check_mn(chk, a.out, "out", M, N, a.x.device, /*output=*/true);
  chk.same_or_disjoint(a.out, "out", a.x, "x");  // in place only as x itself (the header)
  return make_row_call(log ? row_op_log_softmax_fwd() : row_op_softmax_fwd(), fn, {&a.x},
                       {&a.out});
}

RowCall softmax_bwd_call(const SoftmaxBwdArgs& a, bool log) {
  const char* fn = log ? "log_softmax_bwd" : "softmax_bwd";
  const ArgCheck chk(fn, "y");
  chk.matrix(a.y, "y", -1, -1);
  chk.float_dtype(a.y, "y");
  const int64_t M = a.y.shape[0], N = a.y.shape[1];
  row_check_mn(chk, a.dy, "dy", M, N, a.y.device, /*output=*/false);
  row_check_mn(chk, a.dx, "dx", M, N, a.y.device, /*output=*/true);
  // In place only as dy (or y) itself (the header); else memory of its own.
  chk.same_or_disjoint(a.dx, "dx", a.dy, "dy");
  chk.same_or_disjoint(a.dx, "dx", a.y, "y");
  return make_row_call(log ? row_op_log_softmax_bwd() : row_op_softmax_bwd(), fn,
                       {&a.y, &a.dy}, {&a.dx});
}

}  // namespace detail

void softmax_fwd(const SoftmaxFwdArgs& args, cudaStream_t stream) {
  detail::run_row_call(detail::softmax_fwd_call(args, false), stream);
}

void log_softmax_fwd(const SoftmaxFwdArgs& args, cudaStream_t stream) {
  detail::run_row_call(detail::softmax_fwd_call(args, true), stream);
}

void softmax_bwd(const SoftmaxBwdArgs& args, cudaStream_t stream) {
  detail::run_row_call(detail::softmax_bwd_call(args, false), stream);
}

void log_softmax_bwd(const SoftmaxBwdArgs& args, cudaStream_t stream) {
  detail::run_row_call(detail::softmax_bwd_call(args, true), stream);
}

}  // namespace quack
