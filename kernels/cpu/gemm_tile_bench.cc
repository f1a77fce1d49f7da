// Microbenchmark of GemmTile's AVX-512 tiles (row-pair against quad tiles,
// alternating in one process) and of the packed kernels (packed_gemm.h) on one
// thread (best of 20 runs of 10 calls; weights small enough to stay in cache,
// so this is the arithmetic alone) for the SmolLM2-135M matrix shapes:
//   bazel run -c opt //kernels/cpu:gemm_tile_bench -- [n_tok]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemm_tile.h"
#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/quant.h"

namespace k = braid::kernels::cpu;

int main(int argc, char** argv) {
  const int64_t n_tok = argc > 1 ? std::atoi(argv[1]) : 8;
  struct Shape {
    k::DType type;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{k::DType::kQ4_1, 1536, 576},
                          {k::DType::kQ4_1, 576, 1536},
                          {k::DType::kQ4_1, 576, 576},
                          {k::DType::kQ8_0, 4096, 576}};
  std::mt19937 rng(1);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (const Shape& s : shapes) {
    const k::DType act = k::ActivationDType(s.type);
    const size_t wb = k::DTypeRowBytes(s.type, s.cols);
    const size_t xb = k::DTypeRowBytes(act, s.cols);
    std::vector<float> f(s.cols);
    std::vector<uint8_t> w(s.rows * wb), x(n_tok * xb);
    for (int64_t r = 0; r < s.rows; ++r) {
      for (float& v : f) v = dist(rng);
      k::QuantizeRow(s.type, f.data(), &w[r * wb], s.cols);
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      for (float& v : f) v = dist(rng);
      k::QuantizeRow(act, f.data(), &x[t * xb], s.cols);
    }
    std::vector<float> y(n_tok * s.rows);
    double best[2] = {1e9, 1e9};
    for (int round = 0; round < 20; ++round) {
      for (int v = 0; v < 2; ++v) {
        k::internal::SetDisableQuadTilesForTesting(v == 0);
        const auto t0 = std::chrono::steady_clock::now();
        for (int rep = 0; rep < 10; ++rep) {
          k::GemmTile(s.type, w.data(), wb, x.data(), xb, s.cols, 0, s.rows,
                      n_tok, y.data(), s.rows, false);
        }
        const double us = std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - t0)
                              .count() /
                          10;
        if (us < best[v]) best[v] = us;
      }
    }
    const k::PackedWeights pw =
        k::PackWeights(s.type, w.data(), s.rows, s.cols);
    std::vector<float> tables(k::PackedActivationFloats(s.cols, n_tok));
    k::PreparePackedActivations(s.type, x.data(), xb, s.cols, n_tok,
                                tables.data());
    double best_packed = 1e9;
    for (int round = 0; round < 20; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int rep = 0; rep < 10; ++rep) {
        k::PackedGemm(pw, x.data(), xb, tables.data(), n_tok, 0, s.rows,
                      y.data(), s.rows, false);
      }
      const double us = std::chrono::duration<double, std::micro>(
                            std::chrono::steady_clock::now() - t0)
                            .count() /
                        10;
      if (us < best_packed) best_packed = us;
    }
    const double eb = double(s.rows) * s.cols / 32 * n_tok;
    std::printf(
        "%s %ldx%ld n_tok %ld: row-pair tiles %.1f us (%.3f ns per "
        "element and block), quad tiles %.1f us (%.3f)\n",
        k::DTypeName(s.type), s.rows, s.cols, n_tok, best[0],
        best[0] * 1e3 / eb, best[1], best[1] * 1e3 / eb);
    std::printf("  packed: %.1f us (%.3f ns per element and block)\n",
                best_packed, best_packed * 1e3 / eb);
  }
  // Out of cache: a 64 MiB Q4_1 matrix of 576 columns (weights stream from
  // memory, as in a decode step), quad tiles, one thread.
  {
    const k::DType type = k::DType::kQ4_1;
    const int64_t cols = 576, rows = (int64_t{64} << 20) / 360 / 16 * 16;
    const size_t wb = k::DTypeRowBytes(type, cols);
    const k::DType act = k::ActivationDType(type);
    const size_t xb = k::DTypeRowBytes(act, cols);
    std::vector<float> f(cols);
    for (float& v : f) v = dist(rng);
    std::vector<uint8_t> row(wb), w(rows * wb), x(n_tok * xb);
    k::QuantizeRow(type, f.data(), row.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&w[r * wb], row.data(), wb);
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      k::QuantizeRow(act, f.data(), &x[t * xb], cols);
    }
    std::vector<float> y(n_tok * rows);
    k::internal::SetDisableQuadTilesForTesting(false);
    double best = 1e9;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      // PER rows per call (as the model's tasks), the activation tables
      // laid out once (as MatMul does).
      const int64_t per = getenv("PER") ? atoi(getenv("PER")) : rows;
      std::vector<uint8_t> buf(k::GemmTileActivationsBytes(type, cols, n_tok));
      k::GemmTileActivations tables;
      const bool prepared = k::PrepareGemmTileActivations(
          type, x.data(), xb, cols, n_tok, buf.data(), &tables);
      for (int64_t r = 0; r < rows; r += per) {
        k::GemmTile(type, w.data(), wb, x.data(), xb, cols, r,
                    std::min(rows, r + per), n_tok, y.data(), rows, false,
                    prepared ? &tables : nullptr);
      }
      best = std::min(best, std::chrono::duration<double, std::micro>(
                                std::chrono::steady_clock::now() - t0)
                                .count());
    }
    // The packed kernels on the same matrix.
    const k::PackedWeights pw = k::PackWeights(type, w.data(), rows, cols);
    std::vector<float> ptables(k::PackedActivationFloats(cols, n_tok));
    k::PreparePackedActivations(type, x.data(), xb, cols, n_tok,
                                ptables.data());
    double best_packed = 1e9;
    const int64_t per = getenv("PER") ? atoi(getenv("PER")) : rows;
    for (int round = 0; round < 5; ++round) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t r = 0; r < rows; r += per) {
        k::PackedGemm(pw, x.data(), xb, ptables.data(), n_tok, r,
                      std::min(rows, r + per), y.data(), rows, false);
      }
      best_packed =
          std::min(best_packed, std::chrono::duration<double, std::micro>(
                                    std::chrono::steady_clock::now() - t0)
                                    .count());
    }
    const double eb = double(rows) * cols / 32 * n_tok;
    std::printf(
        "Q4_1 %ldx%ld from memory n_tok %ld: %.0f us (%.3f ns per element "
        "and block, %.1f GB/s)\n",
        rows, cols, n_tok, best, best * 1e3 / eb, rows * wb / best / 1e3);
    std::printf("  packed from memory: %.0f us (%.1f GB/s)\n", best_packed,
                rows * wb / best_packed / 1e3);
  }
  return 0;
}
