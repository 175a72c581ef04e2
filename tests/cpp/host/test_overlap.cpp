// may_overlap (src/common/check.h), the aliasing check of every op's outputs: disjoint byte
// ranges; views of one buffer whose ranges interleave (q, k and v of a packed qkv), decided
// exactly when their strides nest, in whatever order the dimensions come; conservative (true)
// otherwise. No GPU: the views are never dereferenced.
#include <gtest/gtest.h>

#include <cstdint>
#include <initializer_list>

#include "common/check.h"

namespace quack::detail {
namespace {

alignas(16) float g_buf[4096];

/// A view of g_buf at element `offset` with the given shape and element strides.
TensorRef view(int64_t offset, std::initializer_list<int64_t> shape,
               std::initializer_list<int64_t> stride, DType t = DType::kFloat32) {
  TensorRef r;
  r.data = g_buf + offset;
  r.dtype = t;
  r.ndim = static_cast<int>(shape.size());
  int i = 0;
  for (int64_t s : shape) r.shape[i++] = s;
  i = 0;
  for (int64_t s : stride) r.stride[i++] = s;
  return r;
}

TEST(MayOverlap, ByteRanges) {
  EXPECT_FALSE(may_overlap(view(0, {4, 4}, {4, 1}), view(16, {4, 4}, {4, 1})));  // adjacent
  EXPECT_TRUE(may_overlap(view(0, {4, 4}, {4, 1}), view(15, {4, 4}, {4, 1})));   // one element
  EXPECT_TRUE(may_overlap(view(0, {4, 4}, {4, 1}), view(0, {4, 4}, {4, 1})));    // itself
  EXPECT_FALSE(may_overlap(view(0, {4, 4}, {4, 1}), TensorRef{}));               // absent
  EXPECT_FALSE(may_overlap(view(0, {0, 4}, {4, 1}), view(0, {4, 4}, {4, 1})));   // empty
}

// A packed qkv of 8 rows x 3 heads of 4: q, k and v are columns 0-3, 4-7 and 8-11 (row stride 12).
TEST(MayOverlap, InterleavedColumnsOfOnePackedBuffer) {
  const TensorRef q = view(0, {8, 4}, {12, 1}), k = view(4, {8, 4}, {12, 1});
  const TensorRef v = view(8, {8, 4}, {12, 1});
  EXPECT_FALSE(may_overlap(q, k));
  EXPECT_FALSE(may_overlap(k, v));
  EXPECT_FALSE(may_overlap(v, q));
  EXPECT_TRUE(may_overlap(q, view(2, {8, 4}, {12, 1})));   // columns 2-5: two shared a row
  EXPECT_TRUE(may_overlap(q, view(12, {8, 4}, {12, 1})));  // q shifted one row
  EXPECT_TRUE(may_overlap(k, view(3, {8, 4}, {12, 1})));   // columns 3-6 hold column 4
}

// The same views with their dimensions listed smallest stride first (a transposed description):
// the answer does not depend on the order.
TEST(MayOverlap, DimensionOrder) {
  const TensorRef q = view(0, {4, 8}, {1, 12}), k = view(4, {4, 8}, {1, 12});
  EXPECT_FALSE(may_overlap(q, k));
  EXPECT_TRUE(may_overlap(q, view(2, {4, 8}, {1, 12})));
  EXPECT_TRUE(may_overlap(q, view(12, {4, 8}, {1, 12})));
}

// Three and four dimensions: (2, 3, 4) blocks of strides (48, 16, 1) in either order.
TEST(MayOverlap, ThreeAndFourDimensions) {
  const TensorRef a = view(0, {2, 3, 4}, {48, 16, 1});
  EXPECT_FALSE(may_overlap(a, view(4, {2, 3, 4}, {48, 16, 1})));
  EXPECT_FALSE(may_overlap(a, view(8, {2, 3, 4}, {48, 16, 1})));
  EXPECT_TRUE(may_overlap(a, view(3, {2, 3, 4}, {48, 16, 1})));
  EXPECT_TRUE(may_overlap(a, view(16, {2, 3, 4}, {48, 16, 1})));  // one block row on
  EXPECT_TRUE(may_overlap(a, view(48, {2, 3, 4}, {48, 16, 1})));  // one block on
  EXPECT_FALSE(may_overlap(view(0, {4, 3, 2}, {1, 16, 48}), view(4, {4, 3, 2}, {1, 16, 48})));
  EXPECT_TRUE(may_overlap(view(0, {4, 3, 2}, {1, 16, 48}), view(16, {4, 3, 2}, {1, 16, 48})));
  const TensorRef d = view(0, {2, 2, 3, 4}, {96, 48, 16, 1});
  EXPECT_FALSE(may_overlap(d, view(4, {2, 2, 3, 4}, {96, 48, 16, 1})));
  EXPECT_TRUE(may_overlap(d, view(96, {2, 2, 3, 4}, {96, 48, 16, 1})));
}

// Where the exact answer is not attempted: true although these do not share a byte.
TEST(MayOverlap, ConservativeWhereNotDecided) {
  EXPECT_TRUE(may_overlap(view(0, {8, 4}, {12, 1}), view(4, {8, 4}, {24, 1})));  // strides differ
  EXPECT_TRUE(may_overlap(view(0, {8, 4}, {12, 1}),
                          view(4, {8, 8}, {24, 1}, DType::kBFloat16)));         // dtypes differ
}

}  // namespace
}  // namespace quack::detail
