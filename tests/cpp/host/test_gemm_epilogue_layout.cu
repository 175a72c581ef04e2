// The GEMM epilogue's hand-written register <-> smem mapping (src/gemm/sm90/epilogue_smem.cuh)
// against CuTe, on the host: the swizzle of the subtile buffers against the CuTe layouts the TMA
// descriptors are built from, the fragment formula against the TiledMma's accumulator
// partition, and the STSM / LDSM x4 addressing against the PTX fragment of stmatrix / ldmatrix
// (lane l holds row l / 4, columns 2·(l % 4), +1 of each 8 x 8 matrix; lanes 8q .. 8q + 7 give
// the row addresses of matrix q).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <vector>

#include "gemm/sm90/kernel.cuh"

namespace {

using namespace quack::detail::sm90;
using bf16 = cutlass::bfloat16_t;
using KMaj = std::integral_constant<GMMA::Major, GMMA::Major::K>;

template <class T, class SmemLayout, int EpiM, int EpiN, int Stages, bool Unswizzled = false>
void expect_swizzle_matches_cute(const char* what) {
  // A 1024-byte aligned buffer: the swizzle acts on address bits, as in shared memory.
  constexpr size_t kBytes = size_t(EpiM) * EpiN * Stages * sizeof(T);
  void* raw = std::aligned_alloc(1024, kBytes);
  ASSERT_NE(raw, nullptr);
  T* buf = static_cast<T*>(raw);
  auto s = as_position_independent_swizzle_tensor(make_tensor(make_smem_ptr(buf), SmemLayout{}));
  constexpr int kRowBytes = EpiN * int(sizeof(T));
  int bad = 0;
  for (int st = 0; st < Stages; ++st)
    for (int r = 0; r < EpiM; ++r)
      for (int c = 0; c < EpiN; ++c) {
        const auto cute_off = reinterpret_cast<const char*>(&s(r, c, st)) - reinterpret_cast<const char*>(buf);
        const auto ours =
            size_t(st) * EpiM * EpiN * sizeof(T) + buffer_offset<kRowBytes, EpiM, Unswizzled>(r, c * int(sizeof(T)));
        if (size_t(cute_off) != ours && bad++ < 5)
          ADD_FAILURE() << what << ": (" << r << ", " << c << ", stage " << st << ") CuTe byte " << cute_off
                        << ", ours " << ours;
      }
  std::free(raw);
}

// EpiN: the epilogue's subtile width (the tile's, or 32 where two outputs narrow a 64-wide one).
template <class Cfg, int EpiN = Cfg::EpiN>
void expect_fragment_matches_cute() {
  constexpr int kFrg = Cfg::EpiM * EpiN / Cfg::kEpiThreads;
  typename Cfg::TiledMma mma;
  // An epilogue group's threads: both warpgroups (cooperative) or one (pingpong, BM = 64).
  for (int t = 0; t < Cfg::kEpiThreads; ++t) {
    auto coord = mma.get_thread_slice(t).partition_C(make_identity_tensor(select<0, 1>(typename Cfg::TileShape{})));
    ASSERT_EQ(int(size<0>(coord)), kFrg * (Cfg::BN / EpiN));
    ASSERT_EQ(int(size<1>(coord)), Cfg::BM / Cfg::EpiM);
    for (int epi_m = 0; epi_m < Cfg::BM / Cfg::EpiM; ++epi_m)
      for (int epi_n = 0; epi_n < Cfg::BN / EpiN; ++epi_n)
        for (int i = 0; i < kFrg; ++i) {
          auto rc = coord(epi_n * kFrg + i, epi_m, 0);
          ASSERT_EQ(int(get<0>(rc)), epi_m * Cfg::EpiM + frag_row(t, (i / 2) % 2))
              << "thread " << t << " subtile (" << epi_m << ", " << epi_n << ") value " << i;
          ASSERT_EQ(int(get<1>(rc)), epi_n * EpiN + frag_col(t, i))
              << "thread " << t << " subtile (" << epi_m << ", " << epi_n << ") value " << i;
        }
  }
}

// Where stmatrix x4 number jj puts thread t's values 8·jj + 2q + c (register q, half c), from the
// addresses matrix_row / matrix_chunk give each lane, against where the fragment formula says
// they belong. (ldmatrix uses the same addressing in the other direction.) EpiM: the subtile's
// rows (for rows of 256 bytes: two column blocks).
template <int EpiN, class T, int EpiThreads, int EpiM = 0>
void expect_matrix_addressing_matches_fragment() {
  constexpr int kRowBytes = EpiN * int(sizeof(T));
  for (int t = 0; t < EpiThreads; ++t) {
    const int lane = t % 32, warp0 = t - lane;
    for (int jj = 0; jj < EpiN / 16; ++jj)
      for (int q = 0; q < 4; ++q)
        for (int c = 0; c < 2; ++c) {
          const int giver = warp0 + 8 * q + lane / 4;  // the lane that addresses row lane / 4 of matrix q
          const uint32_t row_addr = swizzled_offset<kRowBytes, EpiM>(matrix_row(giver), 16 * matrix_chunk(giver, jj));
          const uint32_t written = row_addr + uint32_t((2 * (lane % 4) + c) * sizeof(T));
          const int i = 8 * jj + 2 * q + c;
          const uint32_t expected = swizzled_offset<kRowBytes, EpiM>(frag_row(t, (i / 2) % 2), frag_col(t, i) * int(sizeof(T)));
          ASSERT_EQ(written, expected) << "thread " << t << " jj " << jj << " q " << q << " c " << c;
        }
  }
}

constexpr GMMA::Major kK = GMMA::Major::K;
using CoopTile = TileConfig<bf16, kK, kK, 128, 256, 2, 1, false>;     // 128x256, EpiN 32
using PingpongTile = TileConfig<bf16, kK, kK, 128, 128, 2, 1, true>;  // 64x64 subtiles
using Bm64Tile = TileConfig<bf16, kK, kK, 64, 128, 2, 1, false>;
using Bn64Tile = TileConfig<bf16, kK, kK, 128, 64, 1, 1, false>;
using WideTile = TileConfig<bf16, kK, kK, 128, 192, 2, 1, true>;        // pingpong 128x192: 64x32 subtiles
using Bm256Tile = TileConfig<bf16, kK, kK, 256, 128, 1, 2, false>;      // 2 warpgroups of 128 rows
using Bm256WideTile = TileConfig<bf16, kK, kK, 256, 192, 1, 2, false>;
using Coop = CollectiveEpilogue<CoopTile, LinearCombination, bf16>;
using CoopF32D = CollectiveEpilogue<CoopTile, LinearCombination, float>;  // fp32 D (128-byte rows)
using CoopF32C = CollectiveEpilogue<CoopTile, LinearCombination, bf16, float>;
using Pingpong = CollectiveEpilogue<PingpongTile, LinearCombination, bf16>;
using Bm64 = CollectiveEpilogue<Bm64Tile, LinearCombination, bf16>;
using Wide = CollectiveEpilogue<WideTile, LinearCombination, bf16>;
using Bm256 = CollectiveEpilogue<Bm256Tile, LinearCombination, bf16>;
using Bm256Wide = CollectiveEpilogue<Bm256WideTile, LinearCombination, bf16>;
// Two outputs (preact and postact; dpreact and postact).
using CoopAct = CollectiveEpilogue<CoopTile, ActEpilogue, bf16, void, bf16>;
using PingpongAct = CollectiveEpilogue<PingpongTile, ActEpilogue, bf16, void, bf16>;
using PingpongDAct = CollectiveEpilogue<PingpongTile, DActEpilogue, bf16, void, bf16>;
using CoopActF32 = CollectiveEpilogue<CoopTile, ActEpilogue, float, void, bf16>;  // fp32 preact, bf16 postact
using WideAct = CollectiveEpilogue<WideTile, ActEpilogue, bf16, void, bf16>;
using WideDAct = CollectiveEpilogue<WideTile, DActEpilogue, bf16, void, bf16>;
// gemm_dgated: fp32 words of packed (gate, up) pairs as C and output 0, C loaded ahead.
using CoopDGated = CollectiveEpilogue<CoopTile, DGatedEpilogue<bf16>, float, void, bf16>;
using PingpongDGated = CollectiveEpilogue<PingpongTile, DGatedEpilogue<bf16>, float, void, bf16>;
// Device A/B variants of the pingpong split (instances_ab.txt): C buffers a, output buffers d.
using PingpongA2D3Tile = EpiCAhead<PingpongTile, 2, 3>;
using PingpongA1D2Tile = EpiCAhead<PingpongTile, 1, 2>;
using PingpongA4D2Tile = EpiCAhead<PingpongTile, 4, 2>;
using PingpongA2Tile = EpiCAhead<PingpongTile, 2>;  // the visitor's 2 output buffers (a2d2)
using PingpongA0Tile = EpiCAhead<PingpongTile, 0>;  // no ring: C into the D buffers
using PingpongDGatedA2D3 = CollectiveEpilogue<PingpongA2D3Tile, DGatedEpilogue<bf16>, float, void, bf16>;
using PingpongDGatedA1D2 = CollectiveEpilogue<PingpongA1D2Tile, DGatedEpilogue<bf16>, float, void, bf16>;
using PingpongDGatedA4D2 = CollectiveEpilogue<PingpongA4D2Tile, DGatedEpilogue<bf16>, float, void, bf16>;
using PingpongDGatedA2 = CollectiveEpilogue<PingpongA2Tile, DGatedEpilogue<bf16>, float, void, bf16>;
using PingpongDGatedA0 = CollectiveEpilogue<PingpongA0Tile, DGatedEpilogue<bf16>, float, void, bf16>;
// a3d2ip (EpiInPlace): 3 preact slots that become dpreact's buffers, 2 postact buffers.
using PingpongA3D2IpTile = EpiInPlace<EpiCAhead<PingpongTile, 3, 2>>;
using PingpongDGatedA3D2Ip = CollectiveEpilogue<PingpongA3D2IpTile, DGatedEpilogue<bf16>, float, void, bf16>;
// a3d2io (EpiIoWarp): a3d2ip's buffers, the I/O issued by one warp per warpgroup.
using PingpongA3D2IoTile = EpiIoWarp<EpiInPlace<EpiCAhead<PingpongTile, 3, 2>>>;
using PingpongDGatedA3D2Io = CollectiveEpilogue<PingpongA3D2IoTile, DGatedEpilogue<bf16>, float, void, bf16>;
// Subtiles as wide as a 128-column tile (instances_ab.txt's e128: rows of 256 bytes in two SW128
// column blocks): 256x128 cooperative (128 x 128) and 128x128 pingpong (64 x 128).
using Bm256E128Tile = EpiSubtile<Bm256Tile, 128>;
using PingpongE128Tile = EpiSubtile<PingpongTile, 128>;
using Bm256E128 = CollectiveEpilogue<Bm256E128Tile, LinearCombination, bf16>;
using PingpongE128 = CollectiveEpilogue<PingpongE128Tile, LinearCombination, bf16>;
// e128u: the same subtiles in row-major buffers without swizzle (one TMA box per subtile).
using Bm256E128U = CollectiveEpilogue<EpiUnswizzled<Bm256E128Tile>, LinearCombination, bf16>;
using PingpongE128U = CollectiveEpilogue<EpiUnswizzled<PingpongE128Tile>, LinearCombination, bf16>;

template <class Cfg>
void expect_buffers_match_cute(const char* what) {
  expect_swizzle_matches_cute<typename Cfg::ElementD, typename Cfg::SmemLayoutD, Cfg::EpiM, Cfg::EpiN,
                              Cfg::kStagesDBuffers, Cfg::kUnswizzled>(what);
  expect_swizzle_matches_cute<typename Cfg::ElementC, typename Cfg::SmemLayoutC, Cfg::EpiM, Cfg::EpiN,
                              Cfg::kStagesC, Cfg::kUnswizzled>(what);
  if constexpr (Cfg::kOutputs == 2)
    expect_swizzle_matches_cute<typename Cfg::ElementD1, typename Cfg::SmemLayoutD1, Cfg::EpiM, Cfg::EpiN,
                                Cfg::EpiStagesD>(what);
}

TEST(GemmEpilogueLayout, SwizzleMatchesCuteBuffers) {
  expect_buffers_match_cute<Coop>("128x256");
  expect_buffers_match_cute<CoopF32D>("128x256 fp32 D");
  expect_buffers_match_cute<CoopF32C>("128x256 fp32 C");
  expect_buffers_match_cute<Pingpong>("128x128 pingpong");
  expect_buffers_match_cute<Bm64>("64x128");
  expect_buffers_match_cute<Wide>("128x192 pingpong");
  expect_buffers_match_cute<Bm256>("256x128");
  expect_buffers_match_cute<CoopAct>("128x256 two outputs");
  expect_buffers_match_cute<PingpongAct>("128x128 pingpong two outputs");
  expect_buffers_match_cute<CoopActF32>("128x256 fp32 output 0, bf16 output 1");
  expect_buffers_match_cute<WideAct>("128x192 pingpong two outputs");
  expect_buffers_match_cute<CoopDGated>("128x256 dgated (C ring)");
  expect_buffers_match_cute<PingpongDGated>("128x128 pingpong dgated (C ring)");
  expect_buffers_match_cute<PingpongDGatedA2D3>("128x128 pingpong dgated, 2 C and 3 D buffers");
  expect_buffers_match_cute<PingpongDGatedA3D2Ip>("128x128 pingpong dgated, 3 slots in place, 2 postact buffers");
  expect_buffers_match_cute<Bm256E128>("256x128 e128 (128 x 128 subtiles)");
  expect_buffers_match_cute<PingpongE128>("128x128 pingpong e128 (64 x 128 subtiles)");
  expect_buffers_match_cute<Bm256E128U>("256x128 e128u (row-major, no swizzle)");
  expect_buffers_match_cute<PingpongE128U>("128x128 pingpong e128u (row-major, no swizzle)");
  static_assert(!Bm256E128::kUnswizzled && Bm256E128U::kUnswizzled && PingpongE128U::kUnswizzled);
  EXPECT_EQ(Bm256E128U::kSmemBytes, Bm256E128::kSmemBytes);
  EXPECT_EQ(PingpongE128U::kSmemBytes, PingpongE128::kSmemBytes);
}

// a3d2ip: the ring's 3 slots of 64 x 32 words (8 KB) are dpreact's buffers, beside 2 postact
// buffers of 64 x 32 bf16 (4 KB): a1d2's 32 KB per warpgroup, so the same 5 mainloop stages;
// loads 2 subtiles ahead.
TEST(GemmEpilogueLayout, DGatedInPlaceRingKeepsTheStages) {
  using E = PingpongDGatedA3D2Ip;
  EXPECT_TRUE(E::kInPlace);
  EXPECT_TRUE(E::kCAhead);
  EXPECT_TRUE(E::kCInD);
  EXPECT_FALSE(E::kReuseSmemC);
  EXPECT_EQ(E::EpiN, 32);
  EXPECT_EQ(E::kStagesC, 3);
  EXPECT_EQ(E::kStagesDBuffers, 3);
  EXPECT_EQ(E::EpiStagesD, 2);
  EXPECT_EQ(E::kCAheadDist, 2);
  EXPECT_EQ(E::kSmemBytes, 65536);
  EXPECT_EQ(E::kSmemBytes, PingpongDGatedA1D2::kSmemBytes);
  EXPECT_EQ((GemmKernel<PingpongA3D2IpTile, E>::Stages), 5);
  EXPECT_EQ(E::kSubCountWrap % (2 * E::kStagesC), 0);  // the slot's phase
  EXPECT_EQ(E::kSubCountWrap % E::EpiStagesD, 0);
  EXPECT_LE(sizeof(GemmKernel<PingpongA3D2IpTile, E>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  EXPECT_EQ(sizeof(GemmKernel<PingpongA3D2IpTile, E>::SharedStorage),
            sizeof(GemmKernel<PingpongA1D2Tile, PingpongDGatedA1D2>::SharedStorage));
  EXPECT_FALSE(PingpongDGatedA1D2::kInPlace);
  EXPECT_EQ(PingpongDGatedA1D2::kCAheadDist, 1);
  EXPECT_EQ(PingpongDGatedA1D2::kStagesDBuffers, PingpongDGatedA1D2::EpiStagesD);
}

// a3d2io: a3d2ip's buffers and mainloop stages; its barriers per warpgroup are 3 c_full, 3
// d_full and 2 d1_free mbarriers beside the 2 KB the stage count leaves for them.
TEST(GemmEpilogueLayout, DGatedIoWarpKeepsTheInPlaceBuffers) {
  using E = PingpongDGatedA3D2Io;
  EXPECT_TRUE(E::kIo);
  EXPECT_TRUE(E::kInPlace);
  EXPECT_FALSE(PingpongDGatedA3D2Ip::kIo);
  EXPECT_FALSE(PingpongDGatedA1D2::kIo);
  EXPECT_EQ(E::kStagesC, 3);
  EXPECT_EQ(E::EpiStagesD, 2);
  EXPECT_EQ(E::kSmemBytes, PingpongDGatedA3D2Ip::kSmemBytes);
  EXPECT_EQ((GemmKernel<PingpongA3D2IoTile, E>::Stages), 5);
  EXPECT_EQ(sizeof(E::BarrierStorage), size_t(8 * 2 * (3 + 3 + 2)));
  EXPECT_EQ(sizeof(PingpongDGatedA3D2Ip::BarrierStorage), size_t(8 * 2 * 3));  // no I/O barriers without io
  EXPECT_EQ(E::kSubCountWrap % (2 * E::kStagesC), 0);  // the slot's c_full phase
  EXPECT_EQ(E::kSubCountWrap % (2 * E::EpiStagesD), 0);  // output 1's d1_free phase
  EXPECT_LE(sizeof(GemmKernel<PingpongA3D2IoTile, E>::SharedStorage), size_t(PingpongTile::kMaxSmem));
}

// In place, each thread overwrites the words it read (load_subtile and store_subtile of 32-bit
// values address pair p at the same offset), so the slot has no cross-thread hazard only if no
// two threads' pairs overlap: the 128 threads' 8 pairs of 8 bytes cover a 64 x 32-word subtile
// (8 KB) exactly once, in the fragment order and in the cf order.
TEST(GemmEpilogueLayout, ThreadPairsPartitionA32BitSubtile) {
  for (int cf = 0; cf < 2; ++cf) {
    std::vector<int> owner(64 * 128, -1);
    int overlaps = 0;
    for (int t = 0; t < 128; ++t)
      for (int p = 0; p < 8; ++p) {
        const uint32_t off = cf ? cf_offset(t, p, cf_flip(t)) : swizzled_offset<128>(frag_row(t, p % 2), 4 * frag_col(t, 2 * p));
        ASSERT_LT(off + 8, owner.size() + 1);
        for (uint32_t b = off; b < off + 8; ++b) {
          overlaps += owner[b] != -1;
          owner[b] = t;
        }
      }
    EXPECT_EQ(overlaps, 0) << (cf ? "cf order" : "fragment order");
    int covered = 0;
    for (int o : owner) covered += o != -1;
    EXPECT_EQ(covered, 64 * 128) << (cf ? "cf order" : "fragment order");
  }
}

// gemm_dgated's C ring (kCAhead): as many C buffers as fit beside the mainloop stages the
// epilogue leaves without them, so the ring costs no stage; the A/B variants set the split.
TEST(GemmEpilogueLayout, DGatedCRingCostsNoMainloopStage) {
  // 128x256: 2 output buffers per output either way (2 x 16 KB dpreact, 2 x 8 KB postact); 2 C
  // buffers of 128 x 32 fp32 words (16 KB) fit beside its 3 stages.
  EXPECT_TRUE(CoopDGated::kCAhead);
  EXPECT_FALSE(CoopDGated::kReuseSmemC);
  EXPECT_EQ(CoopDGated::EpiStagesD, 2);
  EXPECT_EQ(CoopDGated::kStagesC, 2);
  EXPECT_EQ((GemmKernel<CoopTile, CoopDGated>::Stages), 3);
  // 128x128 pingpong: 4 stages beside 4 output buffers per output without the ring (8 KB
  // dpreact, 4 KB postact each: 96 KB for the two warpgroups); with it 2 output buffers and 3 C
  // buffers of 64 x 32 words (8 KB) per warpgroup: the same 96 KB, still 4 stages.
  EXPECT_EQ(PingpongDGated::EpiN, 32);
  EXPECT_EQ(PingpongDGated::kStagesD0, 4);
  EXPECT_EQ(PingpongDGated::EpiStagesD, 2);
  EXPECT_EQ(PingpongDGated::kStagesC, 3);
  EXPECT_EQ((GemmKernel<PingpongTile, PingpongDGated>::Stages), 4);
  EXPECT_EQ(PingpongDGated::kSmemBytes, PingpongDGatedA0::kSmemBytes);
  EXPECT_EQ(PingpongDGatedA2D3::kStagesC, 2);
  EXPECT_EQ(PingpongDGatedA2D3::EpiStagesD, 3);
  EXPECT_EQ((GemmKernel<PingpongA2D3Tile, PingpongDGatedA2D3>::Stages), 3);
  EXPECT_EQ((GemmKernel<PingpongA1D2Tile, PingpongDGatedA1D2>::Stages), 5);
  EXPECT_EQ((GemmKernel<PingpongA4D2Tile, PingpongDGatedA4D2>::Stages), 3);
  EXPECT_EQ(PingpongDGatedA2::EpiStagesD, 2);
  EXPECT_EQ((GemmKernel<PingpongA2Tile, PingpongDGatedA2>::Stages), 4);
  EXPECT_FALSE(PingpongDGatedA0::kCAhead);
  EXPECT_TRUE(PingpongDGatedA0::kReuseSmemC);
  EXPECT_EQ(PingpongDGatedA0::EpiStagesD, 4);
  EXPECT_EQ((GemmKernel<PingpongA0Tile, PingpongDGatedA0>::Stages), 4);
  // The visitors without kCAhead keep C in the D buffers (or its one buffer).
  EXPECT_FALSE(PingpongDAct::kCAhead);
  EXPECT_TRUE(PingpongDAct::kReuseSmemC);
  EXPECT_FALSE(WideDAct::kCAhead);
  EXPECT_FALSE(CoopF32C::kCAhead);
  EXPECT_EQ(CoopF32C::kStagesC, 1);
  EXPECT_LE(sizeof(GemmKernel<CoopTile, CoopDGated>::SharedStorage), size_t(CoopTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongTile, PingpongDGated>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongA2D3Tile, PingpongDGatedA2D3>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongA1D2Tile, PingpongDGatedA1D2>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongA4D2Tile, PingpongDGatedA4D2>::SharedStorage), size_t(PingpongTile::kMaxSmem));
}

// 128x192 pingpong's two-output epilogues (act, dact) against plain: two 16-bit outputs in 2
// buffers of 64 x 32 each per warpgroup (32 KB) leave 4 mainloop stages of 40 KB where plain's 3
// one-output buffers (24 KB) leave 5. The A/B variants (instances_ab.txt): plain with 5 buffers
// (a0d5: 4 stages, the control) and dact's preact ring (a1d2 / a2d2: 40 / 48 KB, 4 stages).
using WideA0D5Tile = EpiCAhead<WideTile, 0, 5>;
using WideA1D2Tile = EpiCAhead<WideTile, 1, 2>;
using WideA2D2Tile = EpiCAhead<WideTile, 2, 2>;
TEST(GemmEpilogueLayout, WideTwoOutputsMainloopStages) {
  EXPECT_EQ((GemmKernel<WideTile, Wide>::Stages), 5);
  EXPECT_EQ((GemmKernel<WideTile, WideAct>::Stages), 4);
  EXPECT_EQ((GemmKernel<WideTile, WideDAct>::Stages), 4);
  using PlainA0D5 = CollectiveEpilogue<WideA0D5Tile, LinearCombination, bf16>;
  EXPECT_EQ(PlainA0D5::EpiStagesD, 5);
  EXPECT_EQ((GemmKernel<WideA0D5Tile, PlainA0D5>::Stages), 4);
  using DActA1D2 = CollectiveEpilogue<WideA1D2Tile, DActEpilogue, bf16, void, bf16>;
  using DActA2D2 = CollectiveEpilogue<WideA2D2Tile, DActEpilogue, bf16, void, bf16>;
  EXPECT_TRUE(DActA1D2::kCAhead);
  EXPECT_EQ(DActA1D2::kStagesC, 1);
  EXPECT_EQ(DActA2D2::kStagesC, 2);
  EXPECT_EQ((GemmKernel<WideA1D2Tile, DActA1D2>::Stages), 4);
  EXPECT_EQ((GemmKernel<WideA2D2Tile, DActA2D2>::Stages), 4);
  EXPECT_LE(sizeof(GemmKernel<WideA2D2Tile, DActA2D2>::SharedStorage), size_t(WideTile::kMaxSmem));
  EXPECT_EQ(WideDAct::kSmemBytes, 32768);  // production: 2 x (4 KB dpreact + 4 KB postact) per warpgroup
}

// The fp32-accumulating lincomb (linear + cross-entropy's dweight: D = acc + C, C = D in fp32)
// and its device A/B splits (instances_ab.txt, "lincomb:a<S>d<D>"): 128x256 keeps 3 mainloop
// stages with 1, 2 or 3 C buffers of 128 x 32 fp32 (16 KB) beside 2 output buffers, and takes 4
// with none (a0d2: C into the 2 D buffers, 32 KB, as the bf16 tile's 4 x 8 KB). On the 128x128
// pingpong tile an fp32 D (or C) takes 64 x 32 subtiles (128-byte rows, as two outputs do):
// a1d2 48 KB, a2d2 and a0d4 64 KB for the two warpgroups, all 5 mainloop stages.
using CoopF32A0D2Tile = EpiCAhead<CoopTile, 0, 2>;
using CoopF32A1D2Tile = EpiCAhead<CoopTile, 1, 2>;
using CoopF32A2D2Tile = EpiCAhead<CoopTile, 2, 2>;
using CoopF32A3D2Tile = EpiCAhead<CoopTile, 3, 2>;
using CoopF32A0D2 = CollectiveEpilogue<CoopF32A0D2Tile, LinearCombination, float>;
using CoopF32A1D2 = CollectiveEpilogue<CoopF32A1D2Tile, LinearCombination, float>;
using CoopF32A2D2 = CollectiveEpilogue<CoopF32A2D2Tile, LinearCombination, float>;
using CoopF32A3D2 = CollectiveEpilogue<CoopF32A3D2Tile, LinearCombination, float>;
using PingpongF32A1D2Tile = EpiCAhead<PingpongTile, 1, 2>;
using PingpongF32A2D2Tile = EpiCAhead<PingpongTile, 2, 2>;
using PingpongF32A0D4Tile = EpiCAhead<PingpongTile, 0, 4>;
using PingpongF32A1D2 = CollectiveEpilogue<PingpongF32A1D2Tile, LinearCombination, float>;
using PingpongF32A2D2 = CollectiveEpilogue<PingpongF32A2D2Tile, LinearCombination, float>;
using PingpongF32A0D4 = CollectiveEpilogue<PingpongF32A0D4Tile, LinearCombination, float>;
using PingpongF32C = CollectiveEpilogue<PingpongTile, LinearCombination, bf16, float>;
// The _cf32 mm epilogue (linear + cross-entropy's last dweight rows: bf16 D, fp32 C, the ring)
// on 128x128 pingpong: instances_ab.txt's control of the production 128x192 one (below).
using PingpongBf16CF32A1D2 = CollectiveEpilogue<PingpongF32A1D2Tile, LinearCombination, bf16, float>;

// An epilogue Epi with the C ring on TileA (an EpiCAhead of Tile): its subtile width, C and D
// buffers, shared memory, and the mainloop stages GemmKernel leaves beside it within Tile's
// budget.
template <class TileA, class Epi, class Tile>
void expect_c_ring(int epi_n, int stages_c, int stages_d, int smem, int stages) {
  EXPECT_EQ(Epi::EpiN, epi_n);
  EXPECT_TRUE(Epi::kCAhead);
  EXPECT_EQ(Epi::kStagesC, stages_c);
  EXPECT_EQ(Epi::EpiStagesD, stages_d);
  EXPECT_EQ(Epi::kSmemBytes, smem);
  EXPECT_EQ((GemmKernel<TileA, Epi>::Stages), stages);
  EXPECT_LE(sizeof(typename GemmKernel<TileA, Epi>::SharedStorage), size_t(Tile::kMaxSmem));
}

TEST(GemmEpilogueLayout, Fp32LinCombCRingSplits) {
  EXPECT_FALSE(CoopF32D::kCAhead);
  EXPECT_TRUE(CoopF32D::kReuseSmemC);
  EXPECT_EQ(CoopF32D::EpiStagesD, 4);
  EXPECT_FALSE(CoopF32A0D2::kCAhead);
  EXPECT_TRUE(CoopF32A0D2::kReuseSmemC);
  EXPECT_EQ(CoopF32A0D2::EpiStagesD, 2);
  EXPECT_EQ(CoopF32A0D2::kSmemBytes, 32768);
  EXPECT_EQ((GemmKernel<CoopF32A0D2Tile, CoopF32A0D2>::Stages), 4);
  EXPECT_TRUE(CoopF32A1D2::kCAhead);
  EXPECT_EQ(CoopF32A1D2::kStagesC, 1);
  EXPECT_EQ(CoopF32A1D2::EpiStagesD, 2);
  EXPECT_EQ(CoopF32A1D2::kSmemBytes, 49152);
  EXPECT_EQ((GemmKernel<CoopF32A1D2Tile, CoopF32A1D2>::Stages), 3);
  EXPECT_EQ(CoopF32A2D2::kStagesC, 2);
  EXPECT_EQ(CoopF32A2D2::kSmemBytes, 65536);
  EXPECT_EQ((GemmKernel<CoopF32A2D2Tile, CoopF32A2D2>::Stages), 3);
  EXPECT_EQ(CoopF32A3D2::kStagesC, 3);
  EXPECT_EQ(CoopF32A3D2::kSmemBytes, 81920);
  EXPECT_EQ((GemmKernel<CoopF32A3D2Tile, CoopF32A3D2>::Stages), 3);
  EXPECT_LE(sizeof(GemmKernel<CoopF32A0D2Tile, CoopF32A0D2>::SharedStorage), size_t(CoopTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<CoopF32A1D2Tile, CoopF32A1D2>::SharedStorage), size_t(CoopTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<CoopF32A2D2Tile, CoopF32A2D2>::SharedStorage), size_t(CoopTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<CoopF32A3D2Tile, CoopF32A3D2>::SharedStorage), size_t(CoopTile::kMaxSmem));
  EXPECT_EQ(PingpongF32A1D2::EpiN, 32);
  EXPECT_EQ(PingpongF32A1D2::kFrg, 16);
  EXPECT_EQ(PingpongF32A1D2::kStagesC, 1);
  EXPECT_EQ(PingpongF32A1D2::kSmemBytes, 49152);
  EXPECT_EQ((GemmKernel<PingpongF32A1D2Tile, PingpongF32A1D2>::Stages), 5);
  EXPECT_EQ(PingpongF32A2D2::kStagesC, 2);
  EXPECT_EQ(PingpongF32A2D2::kSmemBytes, 65536);
  EXPECT_EQ((GemmKernel<PingpongF32A2D2Tile, PingpongF32A2D2>::Stages), 5);
  EXPECT_FALSE(PingpongF32A0D4::kCAhead);
  EXPECT_TRUE(PingpongF32A0D4::kReuseSmemC);
  EXPECT_EQ(PingpongF32A0D4::kSmemBytes, 65536);
  EXPECT_EQ((GemmKernel<PingpongF32A0D4Tile, PingpongF32A0D4>::Stages), 5);
  EXPECT_EQ(PingpongF32C::EpiN, 32);  // an fp32 C narrows the subtile too
  EXPECT_EQ(Pingpong::EpiN, 64);      // 16-bit D and C keep 64 x 64
  EXPECT_LE(sizeof(GemmKernel<PingpongF32A1D2Tile, PingpongF32A1D2>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongF32A2D2Tile, PingpongF32A2D2>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongF32A0D4Tile, PingpongF32A0D4>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  // bf16 D with the fp32 C ring: 64 x 32 subtiles, 2 x (2 D buffers of 4 KB + 1 C of 8 KB).
  expect_c_ring<PingpongF32A1D2Tile, PingpongBf16CF32A1D2, PingpongTile>(32, 1, 2, 32768, 6);
  expect_buffers_match_cute<PingpongF32A1D2>("128x128 pingpong fp32 D, 1 C buffer ahead");
  expect_buffers_match_cute<PingpongF32A0D4>("128x128 pingpong fp32 D, C into 4 D buffers");
  expect_buffers_match_cute<CoopF32A1D2>("128x256 fp32 D, 1 C buffer ahead");
  expect_buffers_match_cute<CoopF32A3D2>("128x256 fp32 D, 3 C buffers ahead");
}

// instances.txt's fp32-accumulating dweight GEMMs on 128x192 pingpong with the C ring (a1d2):
// 64 x 32 subtiles (128-byte fp32 rows); fp32 D: 2 x (1 C + 2 D buffers of 8 KB) = 48 KB, 4
// mainloop stages of 40 KB; the _cf32 one (bf16 D, fp32 C): 2 x (8 KB C + 2 x 4 KB D) = 32 KB,
// still 4 stages (a fifth would need 232 KB with the buffers).
using WideF32A1D2 = CollectiveEpilogue<WideA1D2Tile, LinearCombination, float>;
using WideBf16CF32A1D2 = CollectiveEpilogue<WideA1D2Tile, LinearCombination, bf16, float>;
TEST(GemmEpilogueLayout, Fp32LinCombWideCRing) {
  expect_c_ring<WideA1D2Tile, WideF32A1D2, WideTile>(32, 1, 2, 49152, 4);
  expect_c_ring<WideA1D2Tile, WideBf16CF32A1D2, WideTile>(32, 1, 2, 32768, 4);
  expect_buffers_match_cute<WideF32A1D2>("128x192 pingpong fp32 D, 1 C buffer ahead");
}

// The mainloop's stages beside each epilogue (GemmKernel): as many as fit beside the buffers. One
// 16-bit output keeps 4 buffers in flight (3 at 128x192 pingpong), two outputs 2 each (or 4 each
// of half the width), so a second output costs no mainloop stage at 128x256 and 128x128, one at
// 128x192.
TEST(GemmEpilogueLayout, StagesBesideTheEpilogue) {
  EXPECT_EQ((GemmKernel<CoopTile, Coop>::Stages), 4);
  EXPECT_EQ((GemmKernel<CoopTile, CoopF32D>::Stages), 3);
  EXPECT_EQ((GemmKernel<CoopTile, CoopF32C>::Stages), 4);
  EXPECT_EQ((GemmKernel<PingpongTile, Pingpong>::Stages), 5);
  EXPECT_EQ((GemmKernel<Bm64Tile, Bm64>::Stages), 8);
  // Pingpong 128x192: 3 buffers of 64x32 per warpgroup leave room for 5 stages of 40 KB (QuACK's).
  EXPECT_EQ(Wide::EpiStagesD, 3);
  EXPECT_EQ((GemmKernel<WideTile, Wide>::Stages), 5);
  EXPECT_EQ((GemmKernel<Bm256Tile, Bm256>::Stages), 4);
  EXPECT_EQ((GemmKernel<Bm256WideTile, Bm256Wide>::Stages), 3);
  EXPECT_EQ((GemmKernel<CoopTile, CoopAct>::Stages), 4);
  EXPECT_EQ((GemmKernel<PingpongTile, PingpongAct>::Stages), 5);
  EXPECT_EQ((GemmKernel<PingpongTile, PingpongDAct>::Stages), 5);
  // Pingpong 128x192 with two outputs: 2 buffers of 64x32 each per warpgroup (32 KB) leave room
  // for 4 stages.
  EXPECT_EQ(WideAct::EpiN, 32);
  EXPECT_EQ(WideAct::EpiStagesD, 2);
  EXPECT_EQ((GemmKernel<WideTile, WideAct>::Stages), 4);
  EXPECT_EQ((GemmKernel<WideTile, WideDAct>::Stages), 4);
  EXPECT_LE(sizeof(GemmKernel<WideTile, WideDAct>::SharedStorage), size_t(WideTile::kMaxSmem));
  EXPECT_EQ(Coop::EpiStagesD, 4);
  EXPECT_EQ(CoopAct::EpiStagesD, 2);
  EXPECT_EQ(PingpongAct::EpiN, 32);
  EXPECT_EQ(PingpongAct::EpiStagesD, 4);
  EXPECT_EQ(Pingpong::kSmemBytes, PingpongAct::kSmemBytes);
  EXPECT_EQ(Coop::kSmemBytes, CoopAct::kSmemBytes);
  EXPECT_LE(sizeof(GemmKernel<PingpongTile, PingpongDAct>::SharedStorage), size_t(PingpongTile::kMaxSmem));
  // Without a C buffer or a second output the epilogue's storage is D's buffers alone.
  EXPECT_EQ(sizeof(Coop::TensorStorage), sizeof(Coop::StorageD));
  // e128: 128x128 pingpong keeps its bytes (2 buffers of 64 x 128 per warpgroup for 4 of 64 x
  // 64) and its 5 stages; 256x128 takes 2 of 128 x 128 (64 KB, the fewest in flight) for 4 of
  // 128 x 32 (32 KB), so 3 stages of 48 KB instead of 4.
  EXPECT_EQ(PingpongE128::EpiN, 128);
  EXPECT_EQ(PingpongE128::EpiStagesD, 2);
  EXPECT_EQ(PingpongE128::kSmemBytes, Pingpong::kSmemBytes);
  EXPECT_EQ((GemmKernel<PingpongE128Tile, PingpongE128>::Stages), 5);
  EXPECT_EQ(Bm256E128::EpiN, 128);
  EXPECT_EQ(Bm256E128::EpiStagesD, 2);
  EXPECT_EQ(Bm256E128::kSmemBytes, 2 * 128 * 128 * 2);
  EXPECT_EQ((GemmKernel<Bm256E128Tile, Bm256E128>::Stages), 3);
  EXPECT_LE(sizeof(GemmKernel<Bm256E128Tile, Bm256E128>::SharedStorage), size_t(Bm256Tile::kMaxSmem));
  EXPECT_LE(sizeof(GemmKernel<PingpongE128Tile, PingpongE128>::SharedStorage), size_t(PingpongTile::kMaxSmem));
}

TEST(GemmEpilogueLayout, FragmentMatchesCuteAccumulator) {
  expect_fragment_matches_cute<CoopTile>();
  expect_fragment_matches_cute<PingpongTile>();
  expect_fragment_matches_cute<Bm64Tile>();
  expect_fragment_matches_cute<Bn64Tile>();
  expect_fragment_matches_cute<WideTile>();
  expect_fragment_matches_cute<Bm256Tile>();
  expect_fragment_matches_cute<Bm256WideTile>();
  expect_fragment_matches_cute<PingpongTile, PingpongAct::EpiN>();  // 64 x 32 subtiles (two outputs)
  expect_fragment_matches_cute<Bm64Tile, 32>();
  expect_fragment_matches_cute<Bm256Tile, 128>();     // e128: 128 x 128 subtiles
  expect_fragment_matches_cute<PingpongTile, 128>();  // e128: 64 x 128 subtiles
}

TEST(GemmEpilogueLayout, MatrixAddressingMatchesFragment) {
  expect_matrix_addressing_matches_fragment<32, bf16, 256>();  // cooperative 128x256 / 128x64
  expect_matrix_addressing_matches_fragment<64, bf16, 128>();  // pingpong, 64x128
  expect_matrix_addressing_matches_fragment<32, bf16, 128>();  // pingpong 128x192, pingpong with two outputs
  expect_matrix_addressing_matches_fragment<128, bf16, 256, 128>();  // e128: cooperative 256x128
  expect_matrix_addressing_matches_fragment<128, bf16, 128, 64>();   // e128: pingpong 128x128
}

// Rows of 256 bytes (e128) stay conflict-free for STSM / LDSM x4: each 8 x 8 matrix's 8 row
// addresses (one 16-byte chunk each) fall in 8 distinct bank groups (address / 16 mod 8), as in
// one SW128 block: the column blocks do not break the swizzle's spread.
template <int EpiN, int EpiM, int EpiThreads, bool Unswizzled = false>
void expect_matrix_rows_conflict_free() {
  constexpr int kRowBytes = EpiN * 2;
  for (int warp0 = 0; warp0 < EpiThreads; warp0 += 32)
    for (int jj = 0; jj < EpiN / 16; ++jj)
      for (int q = 0; q < 4; ++q) {
        unsigned groups = 0;
        for (int r = 0; r < 8; ++r) {
          const int giver = warp0 + 8 * q + r;
          groups |= 1u << (matrix_offset<kRowBytes, EpiM, Unswizzled>(giver, jj) / 16 % 8);
        }
        EXPECT_EQ(groups, 0xffu) << "warp " << warp0 / 32 << " jj " << jj << " matrix " << q;
      }
}

// e128u: STSM x4 number jj of thread t holds, in register q, its fragment's pair (h = q % 2, block
// ((2·jj + q / 2) ^ rotation(t))) (rotate_blocks), and the lane giving row lane % 8 of matrix q
// gives chunk rotated_chunk: every value must land where the fragment formula puts it in the
// row-major buffer, and each matrix's 8 rows must fall in 8 bank groups.
template <int EpiThreads>
void expect_rotated_addressing_matches_fragment() {
  constexpr int kEpiN = 128, kRowBytes = 256;
  for (int t = 0; t < EpiThreads; ++t) {
    const int lane = t % 32, warp0 = t - lane;
    for (int jj = 0; jj < kEpiN / 16; ++jj)
      for (int q = 0; q < 4; ++q) {
        const int giver = warp0 + 8 * q + lane / 4;  // the lane that addresses row lane / 4 of matrix q
        const uint32_t row_addr = matrix_offset<kRowBytes, 0, true>(giver, jj);
        const int h = q % 2, j = (2 * jj + q / 2) ^ int(rotation(t));  // the pair rotate_blocks put in register q
        for (int c = 0; c < 2; ++c) {
          const uint32_t written = row_addr + uint32_t((2 * (lane % 4) + c) * 2);
          const int i = c + 2 * h + 4 * j;
          const uint32_t expected = uint32_t(frag_row(t, h)) * kRowBytes + uint32_t(frag_col(t, i) * 2);
          ASSERT_EQ(written, expected) << "thread " << t << " jj " << jj << " q " << q << " c " << c;
        }
      }
  }
  expect_matrix_rows_conflict_free<kEpiN, 0, EpiThreads, true>();
}

TEST(GemmEpilogueLayout, UnswizzledRowsRotateBlocks) {
  expect_rotated_addressing_matches_fragment<256>();  // 256x128 cooperative, 128 x 128 subtiles
  expect_rotated_addressing_matches_fragment<128>();  // 128x128 pingpong, 64 x 128 subtiles
  // rotate_blocks: block j ^ rot at slot j (so applying it twice is the identity).
  for (uint32_t rot = 0; rot < 8; ++rot) {
    uint32_t r[32];
    for (int i = 0; i < 32; ++i) r[i] = uint32_t(i);
    rotate_blocks(r, rot);
    for (int j = 0; j < 16; ++j)
      for (int h = 0; h < 2; ++h) EXPECT_EQ(r[h + 2 * j], uint32_t(h + 2 * (j ^ int(rot)))) << "rot " << rot << " j " << j;
  }
}

TEST(GemmEpilogueLayout, WideRowsMatricesConflictFree) {
  expect_matrix_rows_conflict_free<128, 128, 256>();
  expect_matrix_rows_conflict_free<128, 64, 128>();
  expect_matrix_rows_conflict_free<64, 64, 128>();  // the 128-byte rows, for comparison
}

// The cf order (EpiCf, gemm_dgated's a1d2cf): slot i of a thread of odd lane / 4 holds fragment
// value i ^ 8 (the accumulator permuted by store_tile); its 32-bit accesses (cf_offset: preact's
// ld.shared.v2, dpreact's st.shared.v2) and postact's STSM (store_subtile_cf: the lane giving row
// r of a matrix takes chunk group jj ^ (r & 1)) must put every slot's values where the fragment
// order puts that fragment value; and a half-warp's 8-byte accesses must touch each bank once
// (the fragment order: twice).
TEST(GemmEpilogueLayout, ConflictFreeOrderMatchesFragment) {
  constexpr int kEpiN = 32;
  int conflicted = 0;
  for (int t = 0; t < 128; ++t) {
    const int lane = t % 32, warp0 = t - lane;
    const int swap = cf_flip(t) ? 8 : 0;
    for (int p = 0; p < 8; ++p) {  // 32-bit path: slot pair p = values 2p, 2p + 1
      const int v = (2 * p) ^ swap;
      EXPECT_EQ(cf_offset(t, p, cf_flip(t)),
                swizzled_offset<kEpiN * 4>(frag_row(t, (v / 2) % 2), 4 * frag_col(t, v)))
          << "thread " << t << " pair " << p;
    }
    for (int jj = 0; jj < kEpiN / 16; ++jj)  // 16-bit path (postact): STSM x4 jj
      for (int q = 0; q < 4; ++q)
        for (int c = 0; c < 2; ++c) {
          const int giver = warp0 + 8 * q + lane / 4;
          const uint32_t row_addr =
              swizzled_offset<kEpiN * 2>(matrix_row(giver), 16 * matrix_chunk(giver, jj ^ (giver & 1)));
          const uint32_t written = row_addr + uint32_t(2 * (2 * (lane % 4) + c));
          const int v = (8 * jj + 2 * q + c) ^ swap;
          EXPECT_EQ(written, swizzled_offset<kEpiN * 2>(frag_row(t, (v / 2) % 2), 2 * frag_col(t, v)))
              << "thread " << t << " jj " << jj << " q " << q << " c " << c;
        }
  }
  // Banks per half-warp and 8-byte access: cf order once each, fragment order twice.
  for (int cf = 0; cf < 2; ++cf)
    for (int p = 0; p < 8; ++p)
      for (int half = 0; half < 2; ++half) {
        int hits[32] = {};
        for (int lane = 16 * half; lane < 16 * half + 16; ++lane) {
          const uint32_t off = cf ? cf_offset(lane, p, cf_flip(lane))
                                  : swizzled_offset<kEpiN * 4>(frag_row(lane, p % 2), 4 * frag_col(lane, 2 * p));
          ++hits[(off / 4) % 32];
          ++hits[(off / 4 + 1) % 32];
        }
        int most = 0;
        for (int h : hits) most = h > most ? h : most;
        if (cf) {
          EXPECT_EQ(most, 1) << "cf order, pair " << p << ", half-warp " << half;
        } else {
          conflicted += most == 2;
        }
      }
  EXPECT_EQ(conflicted, 16);  // the fragment order: every pair, both half-warps (2-way)
}

TEST(GemmEpilogueLayout, SwizzleIsABijectionWithinEachStage) {
  for (int row_bytes : {64, 128}) {
    std::vector<int> seen(size_t(row_bytes) * 128, 0);
    for (int r = 0; r < 128; ++r)
      for (int b = 0; b < row_bytes; b += 16) {
        const uint32_t off = row_bytes == 64 ? swizzled_offset<64>(r, b) : swizzled_offset<128>(r, b);
        ASSERT_LT(off, seen.size());
        ASSERT_EQ(off % 16, 0u);
        ++seen[off];
      }
    int chunks = 0;
    for (size_t i = 0; i < seen.size(); i += 16) {
      EXPECT_EQ(seen[i], 1) << "row_bytes " << row_bytes << " chunk at byte " << i;
      ++chunks;
    }
    EXPECT_EQ(chunks, row_bytes * 128 / 16);
  }
  // Rows of 256 bytes: two column blocks of `rows` rows (e128).
  for (int rows : {64, 128}) {
    std::vector<int> seen(size_t(256) * rows, 0);
    for (int r = 0; r < rows; ++r)
      for (int b = 0; b < 256; b += 16) {
        const uint32_t off = rows == 64 ? swizzled_offset<256, 64>(r, b) : swizzled_offset<256, 128>(r, b);
        ASSERT_LT(off, seen.size());
        ASSERT_EQ(off % 16, 0u);
        ++seen[off];
      }
    for (size_t i = 0; i < seen.size(); i += 16) EXPECT_EQ(seen[i], 1) << "rows " << rows << " chunk at byte " << i;
  }
}

}  // namespace
