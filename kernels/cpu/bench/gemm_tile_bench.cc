// Microbenchmark of the AVX-512 GEMM kernels on one thread, for the
// SmolLM2-135M matrix shapes and n_tok tokens, three ways in one process:
// GemmTile on the GGUF rows, GemmTileQuads on the quad layout (the default
// on AVX-512, the same bits) and the packed kernels (packed_gemm.h, the
// opt-in arithmetic). First with weights small enough to stay in cache (the
// arithmetic alone: best of 20 runs of 10 calls), then a 64 MiB Q4_1
// matrix that streams from memory as in a decode step (best of 5).
// MB=n: that matrix's size in MiB instead (a large last-level cache may
// hold 64 MiB; SmolLM2-135M Q4_1 reads 92 MiB a step).
//   bazel run -c opt //kernels/cpu/bench:gemm_tile_bench -- [n_tok]
// PER=rows: rows per call in the from-memory runs (as the model's tasks).
// THREADS=n: the from-memory run on n threads, each streaming an equal
// share of the rows (prefetching to its share's end, as the model's
// products do); its figures are per element-block of the whole matrix, so
// with n threads the time a thread spends on one is n times the figure.
// Then the quad layout's arithmetic alone on the same threads: each thread
// takes its share's first 256 rows over and over (they stay in L2), as many
// rows as its share: the stream's time over this and over the memory's
// (the 1-token figure) says how well the two overlap.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/gemm/packed_gemm.h"
#include "kernels/cpu/quant/quant.h"

namespace k = braid::kernels::cpu;

namespace {

// Best microseconds of `rounds` runs of `reps` calls of fn, per call.
template <typename Fn>
double BestUs(int rounds, int reps, Fn&& fn) {
  double best = 1e18;
  for (int round = 0; round < rounds; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int rep = 0; rep < reps; ++rep) fn();
    best = std::min(best, std::chrono::duration<double, std::micro>(
                              std::chrono::steady_clock::now() - t0)
                                  .count() /
                              reps);
  }
  return best;
}

// One matrix of `type` [rows, cols] against n_tok activation rows, with the
// tables of each kernel laid out once (as MatMul does).
struct Case {
  k::DType type;
  int64_t rows, cols, n_tok;
  size_t wb, xb;
  std::vector<uint8_t> w, x, tables, quad_tables;
  k::GemmTileActivations tab, quad_tab;
  bool has_tab = false, has_quad_tab = false;
  k::QuadWeights quads;
  k::PackedWeights packed;
  std::vector<float> packed_tables, y;

  Case(k::DType t, int64_t r, int64_t c, int64_t n, std::mt19937& rng,
       bool same_rows)
      : type(t), rows(r), cols(c), n_tok(n) {
    const k::DType act = k::ActivationDType(type);
    wb = k::DTypeRowBytes(type, cols);
    xb = k::DTypeRowBytes(act, cols);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> f(cols);
    w.resize(rows * wb);
    x.resize(n_tok * xb);
    for (int64_t i = 0; i < rows; ++i) {
      if (i == 0 || !same_rows) {
        for (float& v : f) v = dist(rng);
        k::QuantizeRow(type, f.data(), &w[i * wb], cols);
      } else {
        std::memcpy(&w[i * wb], w.data(), wb);
      }
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      for (float& v : f) v = dist(rng);
      k::QuantizeRow(act, f.data(), &x[t * xb], cols);
    }
    tables.resize(k::GemmTileActivationsBytes(type, cols, n_tok));
    quad_tables.resize(tables.size());
    has_tab = k::PrepareGemmTileActivations(type, x.data(), xb, cols, n_tok,
                                            tables.data(), &tab);
    has_quad_tab = k::PrepareGemmTileActivations(
        type, x.data(), xb, cols, n_tok, quad_tables.data(), &quad_tab, 0, -1,
        /*quad_layout=*/true);
    quads = k::RepackQuads(type, w.data(), rows, cols);
    packed = k::PackWeights(type, w.data(), rows, cols);
    packed_tables.resize(k::PackedActivationFloats(cols, n_tok));
    k::PreparePackedActivations(type, x.data(), xb, cols, n_tok,
                                packed_tables.data());
    y.resize(n_tok * rows);
  }
  // Rows [r0, r1); rows up to prefetch_end are the caller's next.
  void Gguf(int64_t r0, int64_t r1, int64_t prefetch_end = 0) {
    k::GemmTile(type, w.data(), wb, x.data(), xb, cols, r0, r1, n_tok, y.data(),
                rows, false, has_tab ? &tab : nullptr, prefetch_end);
  }
  void Quads(int64_t r0, int64_t r1, int64_t prefetch_end = 0) {
    k::GemmTileQuads(quads, x.data(), xb, r0, r1, n_tok, y.data(), rows, false,
                     has_quad_tab ? &quad_tab : nullptr, prefetch_end);
  }
  void Packed(int64_t r0, int64_t r1, int64_t /*prefetch_end*/ = 0) {
    k::PackedGemm(packed, x.data(), xb, packed_tables.data(), n_tok, r0, r1,
                  y.data(), rows, false);
  }
  double ElementBlocks() const { return double(rows) * cols / 32 * n_tok; }
};

}  // namespace

int main(int argc, char** argv) {
  const int64_t n_tok = argc > 1 ? std::atoi(argv[1]) : 8;
  if (!k::CanRepackQuads(k::DType::kQ4_1, 4, 32)) {
    std::fprintf(stderr, "needs AVX-512 with VNNI\n");
    return 1;
  }
  struct Shape {
    k::DType type;
    int64_t rows, cols;
  };
  const Shape shapes[] = {{k::DType::kQ4_1, 1536, 576},
                          {k::DType::kQ4_1, 576, 1536},
                          {k::DType::kQ4_1, 576, 576},
                          {k::DType::kQ8_0, 4096, 576}};
  std::mt19937 rng(1);
  std::printf("ns per element and block (and token); one thread\n");
  for (const Shape& s : shapes) {
    Case c(s.type, s.rows, s.cols, n_tok, rng, /*same_rows=*/false);
    const double eb = c.ElementBlocks() / 1e3;
    const double gguf = BestUs(20, 10, [&] { c.Gguf(0, c.rows); });
    const double quads = BestUs(20, 10, [&] { c.Quads(0, c.rows); });
    const double packed = BestUs(20, 10, [&] { c.Packed(0, c.rows); });
    std::printf(
        "%s %ldx%ld n_tok %ld in cache: GGUF rows %.3f, quad layout %.3f, "
        "packed %.3f\n",
        k::DTypeName(s.type), s.rows, s.cols, n_tok, gguf / eb, quads / eb,
        packed / eb);
  }
  // Out of cache: MB (default 64) MiB of Q4_1 rows of 576 columns.
  const int64_t mib = getenv("MB") ? std::max(1, atoi(getenv("MB"))) : 64;
  const int64_t rows = (mib << 20) / 360 / 16 * 16;
  Case c(k::DType::kQ4_1, rows, 576, n_tok, rng, /*same_rows=*/true);
  const int64_t per = getenv("PER") ? atoi(getenv("PER")) : rows;
  const int threads =
      getenv("THREADS") ? std::max(1, atoi(getenv("THREADS"))) : 1;
  // in_l2: each call on the share's first `per` (at most 256) rows again.
  auto run = [&](auto&& kernel, bool in_l2 = false) {
    // Thread i's share: rows [rows * i / threads, rows * (i + 1) / threads)
    // rounded to 16, in calls of `per` rows.
    auto share = [&](int i) {
      const int64_t a = rows * i / threads / 16 * 16;
      const int64_t b =
          i == threads - 1 ? rows : rows * (i + 1) / threads / 16 * 16;
      const int64_t n = in_l2 ? std::min<int64_t>(per, 256) : per;
      for (int64_t r = a; r < b; r += n) {
        const int64_t r0 = in_l2 ? a : r;
        const int64_t r1 = std::min(in_l2 ? a + n : b, r0 + n);
        kernel(r0, r1, in_l2 ? r1 : b);
      }
    };
    return BestUs(5, 1, [&] {
      std::vector<std::thread> others;
      for (int i = 1; i < threads; ++i) others.emplace_back(share, i);
      share(0);
      for (std::thread& t : others) t.join();
    });
  };
  const double gguf =
      run([&](int64_t a, int64_t b, int64_t e) { c.Gguf(a, b, e); });
  auto quad_rows = [&](int64_t a, int64_t b, int64_t e) { c.Quads(a, b, e); };
  const double quads = run(quad_rows);
  const double packed =
      run([&](int64_t a, int64_t b, int64_t e) { c.Packed(a, b, e); });
  const double arith = run(quad_rows, /*in_l2=*/true);
  const double eb = c.ElementBlocks() / 1e3, gb = rows * c.wb / 1e3;
  std::printf(
      "Q4_1 %ldx576 n_tok %ld from memory, %d thread(s): GGUF rows %.3f (%.1f "
      "GB/s), quad layout %.3f (%.1f GB/s), packed %.3f (%.1f GB/s); quad "
      "layout's arithmetic alone %.3f\n",
      rows, n_tok, threads, gguf / eb, gb / gguf, quads / eb, gb / quads,
      packed / eb, gb / packed, arith / eb);
  return 0;
}
