// GemmTile on one thread, any ISA: rows [0, ROWS) (default 64) of a matrix
// of each type (SmolLM2's and Llama's K-quant shapes) against n_tok tokens,
// on the GGUF rows and, where this CPU repacks the type, on its quad / octet
// layout (RepackQuads), the two interleaved; best of 60 short runs, so the
// figures hold on a loaded machine. Prints GMAC/s of each.
//   bazel run -c opt //kernels/cpu/bench:gemm_prefill_bench -- [n_tok]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/gemm/gemm_tile.h"
#include "kernels/cpu/quant/quant.h"

namespace k = braid::kernels::cpu;

int main(int argc, char** argv) {
  const int64_t n_tok = argc > 1 ? std::atoll(argv[1]) : 512;
  const std::vector<std::string> variants = {"rows", "repacked"};
  struct Shape {
    k::DType type;
    int64_t rows, cols;
  };
  const int64_t nr = std::getenv("ROWS") ? std::atoll(std::getenv("ROWS")) : 64;
  const Shape shapes[] = {
      {k::DType::kQ5_0, nr, 576},  {k::DType::kQ4_1, nr, 576},
      {k::DType::kQ8_0, nr, 576},  {k::DType::kQ4_K, nr, 1536},
      {k::DType::kQ5_K, nr, 1536}, {k::DType::kQ6_K, nr, 1536}};
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (const Shape& s : shapes) {
    const size_t wb = k::DTypeRowBytes(s.type, s.cols);
    const k::DType at = k::ActivationDType(s.type);
    const size_t xb = k::DTypeRowBytes(at, s.cols);
    std::vector<uint8_t> w(wb * s.rows), x(xb * n_tok);
    std::vector<float> row(s.cols);
    for (int64_t r = 0; r < s.rows; ++r) {
      for (float& v : row) v = nd(rng);
      k::QuantizeRow(s.type, row.data(), w.data() + r * wb, s.cols);
    }
    for (int64_t t = 0; t < n_tok; ++t) {
      for (float& v : row) v = nd(rng);
      k::QuantizeRow(at, row.data(), x.data() + t * xb, s.cols);
    }
    std::vector<float> y(s.rows * n_tok), ref;
    const bool quads = k::CanRepackQuads(s.type, s.rows, s.cols);
    k::QuadWeights qw;
    if (quads) qw = k::RepackQuads(s.type, w.data(), s.rows, s.cols);
    std::vector<double> best(variants.size(), 1e18);
    for (int round = 0; round < 60; ++round) {
      for (size_t c = 0; c < variants.size(); ++c) {
        if (c == 1 && !quads) continue;
        const auto t0 = std::chrono::steady_clock::now();
        if (c == 1) {
          k::GemmTileQuads(qw, x.data(), xb, 0, s.rows, n_tok, y.data(), s.rows,
                           false);
        } else {
          k::GemmTile(s.type, w.data(), wb, x.data(), xb, s.cols, 0, s.rows,
                      n_tok, y.data(), s.rows, false);
        }
        best[c] = std::min(best[c], std::chrono::duration<double, std::micro>(
                                        std::chrono::steady_clock::now() - t0)
                                        .count());
        if (ref.empty()) ref = y;
        if (y != ref) {
          std::fprintf(stderr, "the repacked layout changed the bits\n");
          return 1;
        }
      }
    }
    std::printf("%s rows %lld cols %lld n_tok %lld:", k::DTypeName(s.type),
                static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                static_cast<long long>(n_tok));
    for (size_t c = 0; c < (quads ? 2 : 1); ++c) {
      const double gmacs = 1e-3 * s.rows * s.cols * n_tok / best[c];
      std::printf("  %s %.0f us %.2f GMAC/s", variants[c].c_str(), best[c],
                  gmacs);
    }
    std::printf("\n");
  }
  return 0;
}
