#include "kernels/cpu/gemm/gemm_tile.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/gemm/gemm_avx512_blocks.h"
#include "kernels/cpu/quant/dot.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {

size_t GemmTileActivationsBytes(DType type, int64_t n, int64_t n_tok) {
  return UseAvx512() ? internal::GemmTileActivationsBytesAvx512(type, n, n_tok)
                     : 0;
}

bool PrepareGemmTileActivations(DType type, const uint8_t* x,
                                size_t x_row_bytes, int64_t n, int64_t n_tok,
                                uint8_t* buf, GemmTileActivations* out,
                                int64_t t0, int64_t t1, bool quad_layout,
                                int64_t b0, int64_t b1) {
  return UseAvx512() &&
         internal::PrepareGemmTileActivationsAvx512(
             type, x, x_row_bytes, n, n_tok, buf, out, t0, t1 < 0 ? n_tok : t1,
             quad_layout, b0, b1 < 0 ? n / kQK : b1);
}

namespace {
// Rows a group of the layout interleaves: 8 for the octets of
// gemm_octets_avx2.cc, else 4.
int64_t GroupRows(DType type) { return internal::IsOctetType(type) ? 8 : 4; }
}  // namespace

bool CanRepackQuads(DType type, int64_t rows, int64_t cols) {
  if (internal::IsOctetType(type)) {
    return UseAvx2() && rows > 0 && rows % 8 == 0 && cols > 0 &&
           cols % internal::OctetBlockElements(type) == 0;
  }
  return UseAvx512() &&
         (type == DType::kQ4_1 || type == DType::kQ4_0 ||
          type == DType::kQ8_0) &&
         rows > 0 && rows % 4 == 0 && cols > 0 && cols % kQK == 0 &&
         cols / kQK <= 4096;
}

namespace {

// Where the quad layout keeps row j (of 4) of a quad's block: its scale
// bytes (at dm, dm_bytes of them) and its 4-byte quant groups (group k at
// qs + k * 8).
struct QuadPlaces {
  size_t dm, dm_bytes, qs;
};
QuadPlaces PlaceOf(DType type, int j) {
  const size_t dm_bytes = type == DType::kQ4_1 ? 4 : 2;
  const size_t head = 4 * dm_bytes;  // the 4 rows' scales
  // A row pair's quants.
  const size_t pair_bytes = type == DType::kQ8_0 ? 64 : 32;
  return {j * dm_bytes, dm_bytes, head + (j / 2) * pair_bytes + (j % 2) * 4};
}

}  // namespace

QuadWeights RepackQuads(DType type, const void* w, int64_t rows, int64_t cols,
                        ThreadPool* pool) {
  const size_t row_bytes = DTypeRowBytes(type, cols);
  const size_t bytes = row_bytes * rows;
  QuadWeights q{type, rows, cols, AllocateWeightBytes(bytes)};
  const auto* src = static_cast<const uint8_t*>(w);
  const int64_t group = GroupRows(type);
  // Groups [g0, g1) of `group` rows.
  auto groups = [&](int64_t g0, int64_t g1) {
    if (internal::IsOctetType(type)) {
      internal::RepackOctets(type, src, cols, q.data.get(), g0, g1);
      return;
    }
    const int64_t nb = cols / kQK;
    const size_t block = row_bytes / nb;
    for (int64_t g = g0; g < g1; ++g) {
      for (int64_t i = 0; i < nb; ++i) {
        uint8_t* dst = q.data.get() + (g * nb + i) * 4 * block;
        for (int j = 0; j < 4; ++j) {
          const uint8_t* b = src + (4 * g + j) * row_bytes + i * block;
          const QuadPlaces at = PlaceOf(type, j);
          std::memcpy(dst + at.dm, b, at.dm_bytes);
          for (size_t k = 0; k < (block - at.dm_bytes) / 4; ++k) {
            std::memcpy(dst + at.qs + k * 8, b + at.dm_bytes + k * 4, 4);
          }
        }
      }
    }
  };
  const int64_t n_groups = rows / group;
  if (pool == nullptr || pool->num_threads() == 1) {
    groups(0, n_groups);
  } else {
    const int64_t n = std::min<int64_t>(n_groups, 4 * pool->num_threads());
    pool->ParallelFor(n, [&](int64_t i) {
      groups(i * n_groups / n, (i + 1) * n_groups / n);
    });
  }
  return q;
}

void UnpackQuadRow(const QuadWeights& w, int64_t r, uint8_t* out) {
  if (internal::IsOctetType(w.type)) {
    internal::UnpackOctetRow(w.type, w.data.get(), w.cols, r, out);
    return;
  }
  const size_t row_bytes = DTypeRowBytes(w.type, w.cols);
  const int64_t nb = w.cols / kQK;
  const size_t block = row_bytes / nb;
  const QuadPlaces at = PlaceOf(w.type, static_cast<int>(r % 4));
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* b = w.data.get() + ((r / 4) * nb + i) * 4 * block;
    uint8_t* o = out + i * block;
    std::memcpy(o, b + at.dm, at.dm_bytes);
    for (size_t k = 0; k < (block - at.dm_bytes) / 4; ++k) {
      std::memcpy(o + at.dm_bytes + k * 4, b + at.qs + k * 8, 4);
    }
  }
}

void GemmTileQuads(const QuadWeights& w, const uint8_t* x, size_t x_row_bytes,
                   int64_t r0, int64_t r1, int64_t n_tok, float* y,
                   int64_t ld_y, bool accumulate,
                   const GemmTileActivations* prepared, int64_t prefetch_end) {
  // Whole groups in the tiles; rows of a group cut by the range one by one.
  const int64_t g = GroupRows(w.type);
  const int64_t a = std::min((r0 + g - 1) / g * g, r1),
                b = std::max(r1 / g * g, a);
  if (a < b && internal::IsOctetType(w.type)) {
    (UseAvx512() ? internal::GemmOctetsAvx512 : internal::GemmOctetsAvx2)(
        w.type, w.data.get(), w.cols, x, x_row_bytes, a, b, n_tok, y, ld_y,
        accumulate);
  } else if (a < b) {
    internal::GemmTileAvx512(w.type, w.data.get(),
                             DTypeRowBytes(w.type, w.cols), x, x_row_bytes,
                             w.cols, a, b, n_tok, y, ld_y, accumulate, prepared,
                             /*quad_layout=*/true, prefetch_end);
  }
  auto one_by_one = [&](int64_t from, int64_t to) {
    thread_local std::vector<uint8_t> row;
    for (int64_t r = from; r < to; ++r) {
      row.resize(DTypeRowBytes(w.type, w.cols));
      UnpackQuadRow(w, r, row.data());
      for (int64_t t = 0; t < n_tok; ++t) {
        const float v = DotRow(w.type, row.data(), x + t * x_row_bytes, w.cols);
        float& out = y[t * ld_y + r];
        out = accumulate ? out + v : v;
      }
    }
  };
  one_by_one(r0, a);
  one_by_one(b, r1);
}

void GemmTile(DType type, const uint8_t* w, size_t w_row_bytes,
              const uint8_t* x, size_t x_row_bytes, int64_t n, int64_t r0,
              int64_t r1, int64_t n_tok, float* y, int64_t ld_y,
              bool accumulate, const GemmTileActivations* prepared,
              int64_t prefetch_end) {
  if (UseAvx512() &&
      internal::GemmFloatAvx512(type, w, w_row_bytes,
                                reinterpret_cast<const float*>(x), x_row_bytes,
                                n, r0, r1, n_tok, y, ld_y, accumulate)) {
    return;
  }
  if (UseAvx512() &&
      internal::GemmTileAvx512(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1,
                               n_tok, y, ld_y, accumulate, prepared,
                               /*quad_layout=*/false, prefetch_end)) {
    return;
  }
  if (UseAvx2() && internal::GemmFloatAvx2(
                       type, w, w_row_bytes, reinterpret_cast<const float*>(x),
                       x_row_bytes, n, r0, r1, n_tok, y, ld_y, accumulate)) {
    return;
  }
  if (UseAvx2() &&
      internal::GemmTileAvx2(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1,
                             n_tok, y, ld_y, accumulate, prefetch_end)) {
    return;
  }
  if (UseAvx2() &&
      internal::GemmKQuantAvx2(type, w, w_row_bytes, x, x_row_bytes, n, r0, r1,
                               n_tok, y, ld_y, accumulate)) {
    return;
  }
  for (int64_t t = 0; t < n_tok; ++t) {
    const uint8_t* xt = x + t * x_row_bytes;
    float* yt = y + t * ld_y;
    for (int64_t r = r0; r < r1; ++r) {
      const float v = DotRow(type, w + r * w_row_bytes, xt, n);
      yt[r] = accumulate ? yt[r] + v : v;
    }
  }
}

}  // namespace braid::kernels::cpu
