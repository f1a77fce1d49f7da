#include "kernels/cpu/gemm/gemm_tile.h"

#include <cstring>
#include <random>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/quant/dot.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cpu/testing/random_operands.h"

namespace braid::kernels::cpu {
namespace {

// Kernel selections under test: AVX-512 (where the CPU has it), AVX2 with
// and without VNNI, scalar.
void SetMode(int mode) {
  SetDisableAvx512ForTesting(mode != 0);
  SetDisableVnniForTesting(mode == 2);
  SetForceScalarForTesting(mode == 3);
}

// Every element of every tile shape equals DotRow bit for bit, on the
// AVX-512 path (GGUF rows: the row tiles; the quad layout has its own
// test below), the AVX2 path with and without VNNI, and the scalar path.
// Row counts and starts cover full tiles of 4 and 8 rows and leftovers;
// token counts every tile width (8, 4, 2, 1) and chunks of 64 tokens.
TEST(GemmTileTest, BitIdenticalToDotRowForEveryTileShape) {
  int prepared_calls = 0;
  std::mt19937 rng(9);
  // 288 columns (9 blocks), and rows of 1 and 2 blocks: fewer than the
  // tiles' scale tables run ahead (scale_ring.h).
  for (auto [type, cols] : {std::pair{DType::kQ4_0, int64_t{288}},
                            {DType::kQ4_1, int64_t{288}},
                            {DType::kQ8_0, int64_t{288}},
                            {DType::kF16, int64_t{288}},
                            {DType::kBF16, int64_t{288}},
                            {DType::kF32, int64_t{288}},
                            {DType::kQ4_1, int64_t{32}},
                            {DType::kQ4_1, int64_t{64}},
                            {DType::kQ8_0, int64_t{32}},
                            {DType::kQ4_0, int64_t{64}},
                            {DType::kQ5_0, int64_t{288}},
                            {DType::kQ5_1, int64_t{288}},
                            {DType::kIQ4_NL, int64_t{288}},
                            {DType::kQ4_K, int64_t{512}},
                            {DType::kQ6_K, int64_t{256}},
                            {DType::kQ2_K, int64_t{256}},
                            {DType::kQ3_K, int64_t{512}},
                            {DType::kQ5_K, int64_t{256}}}) {
    const int64_t rows = 21, n_tok = 75;
    const auto [w_bytes, x_bytes, w, x] =
        testing::MakeRandomOperands(type, rows, cols, n_tok, 3.0f, rng);
    for (int mode = 0; mode < 4; ++mode) {
      SetMode(mode);
      // The reference in the same mode (scalar and AVX2 round differently;
      // DotRow has no AVX-512 form, the tiles must match its AVX2 bits).
      std::vector<float> want(n_tok * rows);
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          want[t * rows + r] =
              DotRow(type, &w[r * w_bytes], &x[t * x_bytes], cols);
        }
      }
      for (int64_t r0 : {0, 1, 3, 5}) {
        for (int64_t tok : {1, 2, 3, 4, 5, 6, 7, 8, 9, 15, 16, 64, 75}) {
          std::vector<float> y(n_tok * rows, 7.0f);
          GemmTile(type, w.data(), w_bytes, x.data(), x_bytes, cols, r0, rows,
                   tok, y.data(), rows, /*accumulate=*/false);
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const float expect =
                  (t < tok && r >= r0) ? want[t * rows + r] : 7.0f;
              ASSERT_EQ(y[t * rows + r], expect)
                  << DTypeName(type) << " cols " << cols << " mode " << mode
                  << " r0 " << r0 << " tok " << tok << " at " << t << "," << r;
            }
          }
          GemmTile(type, w.data(), w_bytes, x.data(), x_bytes, cols, r0, rows,
                   tok, y.data(), rows, /*accumulate=*/true);
          ASSERT_EQ(y[(tok - 1) * rows + rows - 1],
                    want[(tok - 1) * rows + rows - 1] +
                        want[(tok - 1) * rows + rows - 1]);
          // With the activation tables laid out once (for batches that
          // take them), in two row ranges: the same bits.
          std::vector<uint8_t> buf(GemmTileActivationsBytes(type, cols, tok));
          GemmTileActivations tables;
          if (PrepareGemmTileActivations(type, x.data(), x_bytes, cols, tok,
                                         buf.data(), &tables)) {
            ++prepared_calls;
            std::vector<float> z(n_tok * rows, 7.0f);
            const int64_t mid = r0 + (rows - r0) / 2;
            GemmTile(type, w.data(), w_bytes, x.data(), x_bytes, cols, r0, mid,
                     tok, z.data(), rows, false, &tables);
            GemmTile(type, w.data(), w_bytes, x.data(), x_bytes, cols, mid,
                     rows, tok, z.data(), rows, false, &tables);
            for (int64_t t = 0; t < tok; ++t) {
              for (int64_t r = r0; r < rows; ++r) {
                ASSERT_EQ(z[t * rows + r], want[t * rows + r])
                    << DTypeName(type) << " prepared, mode " << mode << " r0 "
                    << r0 << " tok " << tok << " at " << t << "," << r;
              }
            }
          }
        }
      }
      SetMode(0);
    }
  }
  // Prepared tables were exercised where the CPU has AVX-512.
  if (UseAvx512()) {
    EXPECT_GT(prepared_calls, 0);
  }
}

// y (rows wide, n_tok rows) against DotRow: tokens [0, tok) x rows
// [r0, r1) hold `times` their row dot (1, or 2 after a second, accumulating
// product), every other element 7.
::testing::AssertionResult MatchesRowDots(
    DType type, const std::vector<uint8_t>& w, size_t w_bytes,
    const std::vector<uint8_t>& x, size_t x_bytes, int64_t cols, int64_t rows,
    int64_t tok, int64_t r0, int64_t r1, const std::vector<float>& y,
    float times) {
  for (int64_t t = 0; t < static_cast<int64_t>(y.size()) / rows; ++t) {
    for (int64_t r = 0; r < rows; ++r) {
      const bool in = t < tok && r >= r0 && r < r1;
      const float want =
          in ? times * DotRow(type, &w[r * w_bytes], &x[t * x_bytes], cols)
             : 7.0f;
      if (y[t * rows + r] != want) {
        return ::testing::AssertionFailure()
               << DTypeName(type) << " cols " << cols << " tok " << tok
               << " rows " << r0 << ".." << r1 << " at " << t << "," << r
               << ": " << y[t * rows + r] << " != " << want;
      }
    }
  }
  return ::testing::AssertionSuccess();
}

// The quad layout (RepackQuads): every row comes back unpacked, and
// GemmTileQuads equals DotRow bit for bit for 1-2 tokens (row-quad tiles of
// 16 rows and single quads), 3-4 (row-quad tiles of 8 rows, single quads in
// quad tiles), 5+ (quad tiles, the last 1-2 of 5-6, 9-10, ... in row-quad
// tiles), row ranges of whole quads and cutting
// quads, with and without prepared tables, = and +=, rows of one and of
// several scale-table segments.
TEST(GemmTileTest, QuadLayoutBitIdenticalToDotRow) {
  if (!CanRepackQuads(DType::kQ4_1, 4, 32)) {
    GTEST_SKIP() << "no AVX-512 VNNI: the quad layout is not used here";
  }
  std::mt19937 rng(17);
  // 288 columns: one segment of the tiles' scale tables; 1600: 24 + 24 + 2;
  // 32 and 64: fewer blocks than the scale tables run ahead (scale_ring.h).
  for (auto [type, cols] : {std::pair{DType::kQ4_1, int64_t{288}},
                            {DType::kQ4_1, int64_t{32}},
                            {DType::kQ4_1, int64_t{64}},
                            {DType::kQ8_0, int64_t{64}},
                            {DType::kQ4_0, int64_t{32}},
                            {DType::kQ8_0, int64_t{288}},
                            {DType::kQ4_0, int64_t{288}},
                            {DType::kQ4_1, int64_t{1600}},
                            {DType::kQ8_0, int64_t{1600}},
                            {DType::kQ4_0, int64_t{1600}}}) {
    const int64_t rows = 40, n_tok = 75;
    const auto [w_bytes, x_bytes, w, x] =
        testing::MakeRandomOperands(type, rows, cols, n_tok, 3.0f, rng);
    ASSERT_TRUE(CanRepackQuads(type, rows, cols));
    const QuadWeights q = RepackQuads(type, w.data(), rows, cols);
    std::vector<uint8_t> row(w_bytes);
    for (int64_t r = 0; r < rows; ++r) {
      UnpackQuadRow(q, r, row.data());
      ASSERT_EQ(0, std::memcmp(row.data(), &w[r * w_bytes], w_bytes)) << r;
    }
    // 65 to 68: a chunk of 64 tokens, then one of 1 to 4; 5, 6, 9, 10,
    // 13 and 14: quad tiles, then a row-quad tile for the last 1-2.
    for (int64_t tok :
         {1, 2, 3, 4, 5, 6, 8, 9, 10, 13, 14, 16, 64, 65, 66, 67, 68, 75}) {
      for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 40},
                            {4, 40},
                            {8, 24},
                            {36, 40},
                            {2, 38},
                            {5, 7}}) {
        for (bool use_tables : {false, true}) {
          std::vector<uint8_t> buf(GemmTileActivationsBytes(type, cols, tok));
          GemmTileActivations tables;
          const GemmTileActivations* prepared = nullptr;
          if (use_tables &&
              PrepareGemmTileActivations(type, x.data(), x_bytes, cols, tok,
                                         buf.data(), &tables, 0, -1,
                                         /*quad_layout=*/true)) {
            prepared = &tables;
          }
          std::vector<float> y(n_tok * rows, 7.0f);
          GemmTileQuads(q, x.data(), x_bytes, r0, r1, tok, y.data(), rows,
                        /*accumulate=*/false, prepared);
          ASSERT_TRUE(MatchesRowDots(type, w, w_bytes, x, x_bytes, cols, rows,
                                     tok, r0, r1, y, 1.0f))
              << "tables " << use_tables;
          GemmTileQuads(q, x.data(), x_bytes, r0, r1, tok, y.data(), rows,
                        /*accumulate=*/true, prepared);
          ASSERT_TRUE(MatchesRowDots(type, w, w_bytes, x, x_bytes, cols, rows,
                                     tok, r0, r1, y, 2.0f))
              << "tables " << use_tables;
        }
      }
    }
  }
}

// The octet layout of Q4_K, Q5_K, Q6_K and Q5_0 (RepackQuads on AVX2):
// every row comes back unpacked, and GemmTileQuads (its AVX-512 tiles where
// the CPU has them, and its AVX2 tiles) equals DotRow bit for bit for every
// tile width (1-8: the tokens past whole tiles take one tile of their own
// width), batches up to kRowsOuterTokens and above, ranges
// of whole octets and cutting them, = and +=, on quantized rows and on raw
// random bytes (every bit of the 6-bit scales and mins, and of Q5_0's fifth
// bits, set somewhere); the scalar row dot gives the same bits.
TEST(GemmTileTest, OctetsBitIdenticalToDotRow) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2: the octet layout is not used here";
  std::mt19937 rng(23);
  for (const DType type :
       {DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ5_0}) {
    for (const int64_t cols : {256, 512, 2048}) {
      for (const bool raw : {false, true}) {
        const int64_t rows = 40, n_tok = 21;
        auto [w_bytes, x_bytes, w, x] =
            testing::MakeRandomOperands(type, rows, cols, n_tok, 3.0f, rng);
        if (raw) {
          for (uint8_t& b : w) b = static_cast<uint8_t>(rng());
          // Finite scales of either sign, about 2^-14 .. 2^-6.
          auto scale = [&] {
            return static_cast<uint16_t>(0x0400 + rng() % 0x2000) |
                   static_cast<uint16_t>((rng() & 1) << 15);
          };
          for (int64_t i = 0; i < rows * cols / kQK_K; ++i) {
            if (type == DType::kQ4_K) {
              auto* blocks = reinterpret_cast<BlockQ4_K*>(w.data());
              blocks[i].d = scale();
              blocks[i].dmin = scale();
            } else if (type == DType::kQ5_K) {
              auto* blocks = reinterpret_cast<BlockQ5_K*>(w.data());
              blocks[i].d = scale();
              blocks[i].dmin = scale();
            } else if (type == DType::kQ6_K) {
              reinterpret_cast<BlockQ6_K*>(w.data())[i].d = scale();
            }
          }
          if (type == DType::kQ5_0) {
            auto* blocks = reinterpret_cast<BlockQ5_0*>(w.data());
            for (int64_t i = 0; i < rows * cols / kQK; ++i) {
              blocks[i].d = scale();
            }
          }
        }
        ASSERT_TRUE(CanRepackQuads(type, rows, cols));
        EXPECT_FALSE(CanRepackQuads(type, 12, cols));
        const QuadWeights q = RepackQuads(type, w.data(), rows, cols);
        std::vector<uint8_t> row(w_bytes);
        for (int64_t r = 0; r < rows; ++r) {
          UnpackQuadRow(q, r, row.data());
          ASSERT_EQ(0, std::memcmp(row.data(), &w[r * w_bytes], w_bytes)) << r;
        }
        for (int64_t tok : {1, 2, 3, 4, 5, 6, 7, 8, 11, 14, 16, 17, 21}) {
          for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, 40},
                                {8, 24},
                                {32, 40},
                                {3, 37},
                                {5, 7}}) {
            // The AVX-512 tiles (where the CPU has them), then AVX2's.
            for (int mode : {0, 1}) {
              SetMode(mode);
              std::vector<float> y(n_tok * rows, 7.0f);
              GemmTileQuads(q, x.data(), x_bytes, r0, r1, tok, y.data(), rows,
                            /*accumulate=*/false);
              ASSERT_TRUE(MatchesRowDots(type, w, w_bytes, x, x_bytes, cols,
                                         rows, tok, r0, r1, y, 1.0f))
                  << "raw " << raw << " mode " << mode;
              GemmTileQuads(q, x.data(), x_bytes, r0, r1, tok, y.data(), rows,
                            /*accumulate=*/true);
              ASSERT_TRUE(MatchesRowDots(type, w, w_bytes, x, x_bytes, cols,
                                         rows, tok, r0, r1, y, 2.0f))
                  << "raw " << raw << " mode " << mode;
            }
            SetMode(0);
          }
        }
        // The scalar row dot gives the same bits.
        SetMode(3);
        for (int64_t r = 0; r < rows; ++r) {
          std::vector<float> y(rows, 0.0f);
          ASSERT_EQ(DotRow(type, &w[r * w_bytes], x.data(), cols), [&] {
            SetMode(0);
            const float v = DotRow(type, &w[r * w_bytes], x.data(), cols);
            SetMode(3);
            return v;
          }()) << r;
        }
        SetMode(0);
      }
    }
  }
}

// Long rows (more blocks than the AVX-512 path's scale tables hold for a
// full chunk of tokens) still match DotRow.
TEST(GemmTileTest, LongRowsMatchDotRow) {
  std::mt19937 rng(3);
  for (DType type : {DType::kQ4_1, DType::kQ8_0, DType::kQ4_0}) {
    for (int64_t cols : {int64_t{32}, int64_t{2048 * 32}, int64_t{160 * 32}}) {
      const int64_t rows = 8, n_tok = 9;
      const auto [w_bytes, x_bytes, w, x] =
          testing::MakeRandomOperands(type, rows, cols, n_tok, 1.0f, rng);
      std::vector<float> y(n_tok * rows);
      GemmTile(type, w.data(), w_bytes, x.data(), x_bytes, cols, 0, rows, n_tok,
               y.data(), rows, /*accumulate=*/false);
      for (int64_t t = 0; t < n_tok; ++t) {
        for (int64_t r = 0; r < rows; ++r) {
          ASSERT_EQ(y[t * rows + r],
                    DotRow(type, &w[r * w_bytes], &x[t * x_bytes], cols))
              << DTypeName(type) << " cols " << cols << " at " << t << "," << r;
        }
      }
    }
  }
}

// Float weights have their own AVX-512 and AVX2 tiles (GemmTile takes them
// first): they serve F32, F16 and BF16 rows of any multiple of 16 columns,
// decline other widths and types, and give DotRow's bits for every tile
// shape (groups of 1-4 and 6 tokens, tiles of rows and single rows, rows
// past a 64-row block) and with +=.
TEST(GemmTileTest, FloatTilesServeFloatWeights) {
  if (!UseAvx2()) GTEST_SKIP() << "no AVX2 here: DotRow serves";
  using Tiles =
      bool (*)(DType, const uint8_t*, size_t, const float*, size_t, int64_t,
               int64_t, int64_t, int64_t, float*, int64_t, bool);
  std::vector<Tiles> paths = {internal::GemmFloatAvx2};
  if (UseAvx512()) paths.push_back(internal::GemmFloatAvx512);
  std::mt19937 rng(5);
  for (Tiles tiles : paths) {
    for (DType type : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (int64_t cols : {int64_t{16}, int64_t{80}, int64_t{576}}) {
        const int64_t rows = 77, n_tok = 13;
        const auto [w_bytes, x_bytes, w, x] =
            testing::MakeRandomOperands(type, rows, cols, n_tok, 1.0f, rng);
        for (int64_t tok : {1, 2, 3, 4, 5, 6, 7, 8, 9, 11, 13}) {
          std::vector<float> y(n_tok * rows, 7.0f);
          ASSERT_TRUE(tiles(type, w.data(), w_bytes,
                            reinterpret_cast<const float*>(x.data()), x_bytes,
                            cols, 2, rows, tok, y.data(), rows, false));
          ASSERT_TRUE(tiles(type, w.data(), w_bytes,
                            reinterpret_cast<const float*>(x.data()), x_bytes,
                            cols, 2, rows, tok, y.data(), rows, true));
          for (int64_t t = 0; t < n_tok; ++t) {
            for (int64_t r = 0; r < rows; ++r) {
              const float d =
                  DotRow(type, &w[r * w_bytes], &x[t * x_bytes], cols);
              ASSERT_EQ(y[t * rows + r], (t < tok && r >= 2) ? d + d : 7.0f)
                  << DTypeName(type) << " cols " << cols << " tok " << tok
                  << " at " << t << "," << r;
            }
          }
        }
      }
      const auto [w_bytes, x_bytes, w, x] =
          testing::MakeRandomOperands(type, 4, 40, 1, 1.0f, rng);
      std::vector<float> y(4);
      EXPECT_FALSE(tiles(type, w.data(), w_bytes,
                         reinterpret_cast<const float*>(x.data()), x_bytes, 40,
                         0, 4, 1, y.data(), 4, false));
    }
    std::vector<uint8_t> q(64);
    std::vector<float> x(32), y(1);
    EXPECT_FALSE(tiles(DType::kQ4_1, q.data(), 20, x.data(), 128, 32, 0, 1, 1,
                       y.data(), 1, false));
  }
}

}  // namespace
}  // namespace braid::kernels::cpu
