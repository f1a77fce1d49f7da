// The CUDA paged attention's kernels (attention.h has the design): one tile
// kernel in two configurations, templated on the head size, and the combine
// kernel of split contexts. Tensor cores through mma.sync m16n8k16 (fp16
// inputs, fp32 sums), operands from shared memory through ldmatrix: sm_80
// and later (mma_sm80.cuh has the fragments' layouts). Each thread keeps
// two query rows, g and g + 8 of its warp's 16, and two adjacent
// accumulator tiles of scores are, rounded to fp16, the A operand of the
// product with V (no shuffle).
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>

#include "kernels/cuda/attention_launch.h"
#include "kernels/cuda/attention_plan.h"
#include "kernels/cuda/attention_rule.h"
#include "kernels/cuda/launch.cuh"
#include "kernels/cuda/mma_sm80.cuh"

namespace braid::kernels::cuda {
namespace {

using sm80::CopyAsync16;
using sm80::CopyAsyncCommit;
using sm80::CopyAsyncWait;
using sm80::LoadMatrix4;
using sm80::LoadMatrix4Trans;
using sm80::Mma16816;
using sm80::PackHalf2;

constexpr unsigned kFullMask = 0xffffffffu;
constexpr float kLog2e = 1.4426950408889634f;
// Bits of an entry's flags in a tile.
constexpr int kInSlice = 1;  // in the block's slice of the context
constexpr int kListed = 2;   // its stream is in the sequence's visible list

// ---- The tile kernel ----------------------------------------------------

// A block of warps_q x warps_k warps: warp w takes query rows
// 16 * (w % warps_q) .. + 15 of the block's rows and keys
// warp_keys * (w / warps_q) .. of each tile of warps_k * warp_keys entries.
template <int head_dim, int warps_q, int warps_k, int warp_keys>
struct Tile {
  static constexpr int kDim = head_dim;
  static constexpr int kWarpsQ = warps_q;
  static constexpr int kWarpsK = warps_k;
  static constexpr int kWarpKeys = warp_keys;
  static constexpr int kRows = 16 * warps_q;
  static constexpr int kKeys = warps_k * warp_keys;
  static constexpr int kThreads = 32 * warps_q * warps_k;
  // Shared rows padded by 16 bytes: ldmatrix's eight rows and the
  // fragments' stores then fall in distinct banks.
  static constexpr int kKvStride = head_dim + 8;  // fp16
  static constexpr int kOStride = head_dim + 8;   // f32
  static constexpr int kKvBytes = 2 * kKeys * kKvStride * 2;
  static constexpr int kOBytes = warps_k * kRows * kOStride * 4;
  // K and V tiles, reused for the warps' outputs after the last tile.
  static constexpr int kSmemBytes = kKvBytes > kOBytes ? kKvBytes : kOBytes;
  static_assert(head_dim % 16 == 0 && warp_keys % 16 == 0, "mma tiles");
};

template <int head_dim>
using DecodeTile = Tile<head_dim, 1, 4, 16>;
template <int head_dim>
using PrefillTile = Tile<head_dim, 4, 1, (head_dim <= 128 ? 64 : 32)>;
static_assert(DecodeTile<128>::kRows == kDecodeBlockRows, "attention_plan.h");
static_assert(PrefillTile<128>::kRows == kPrefillBlockRows, "attention_plan.h");

struct TileArgs {
  const float* q;  // [n_tok, n_head, head_dim]
  float* out;      // [n_tok, n_head, head_dim]
  const uint16_t* k;
  const uint16_t* v;
  const CudaEntryMeta* kv_meta;
  const CudaEntryMeta* q_meta;
  const CudaAttentionSeq* seqs;
  const int32_t* block_tables;
  const int32_t* visible;
  // With splits > 1: [splits, part_rows, head_dim] and [splits, part_rows]
  // (row (blockIdx.y * q_tiles + blockIdx.x) * block rows + r).
  float* part_o;
  float* part_lse;
  int64_t part_rows;
  int n_head, n_kv_head, group, block_size, window, splits;
  float scale_log2;  // the score scale times log2(e): softmax in base 2
  float softcap;
};

// Whether any row of the block (positions query_y[0..1]) may see an entry
// of the tile (positions key_y[0..1]): the rule needs y' <= y and, with a
// window, y' > y - window. An empty tile has key_y[0] = INT_MAX.
__device__ __forceinline__ bool TileMayBeSeen(const int* key_y,
                                              const int* query_y, int window) {
  if (key_y[0] > query_y[1]) return false;
  return window <= 0 || int64_t{key_y[1]} > int64_t{query_y[0]} - window;
}

// Query rows of the block and their state: per thread, rows g and g + 8 of
// its warp's 16, their tags, their fp16 A fragments for every 16 dims, and
// the online softmax's running max (base 2), sum and weighted V sum.
template <class T>
struct RowState {
  CudaEntryMeta meta[2];
  bool valid[2];
  uint32_t q[T::kDim / 16][4];
  float max[2];
  float sum[2];
  float o[T::kDim / 8][4];
};

template <class T>
__device__ __forceinline__ void LoadRows(const TileArgs& a,
                                         const CudaAttentionSeq& seq, int kvh,
                                         int row0, int num_rows,
                                         RowState<T>& st) {
  const int lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
  const int wq = (threadIdx.x / 32) % T::kWarpsQ;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int row = row0 + wq * 16 + g + 8 * i;
    st.valid[i] = row < num_rows;
    const int token = seq.first_token + row / a.group;
    const int head = kvh * a.group + row % a.group;
    st.meta[i] = st.valid[i] ? a.q_meta[token] : CudaEntryMeta{0, 0};
    const float* q = a.q + (int64_t{token} * a.n_head + head) * T::kDim;
#pragma unroll
    for (int kk = 0; kk < T::kDim / 16; ++kk) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float2 x = make_float2(0.0f, 0.0f);
        if (st.valid[i]) {
          x = *reinterpret_cast<const float2*>(q + kk * 16 + h * 8 + 2 * c);
        }
        st.q[kk][i + 2 * h] = PackHalf2(x.x, x.y);
      }
    }
    st.max[i] = -INFINITY;
    st.sum[i] = 0.0f;
  }
#pragma unroll
  for (int d = 0; d < T::kDim / 8; ++d) {
#pragma unroll
    for (int e = 0; e < 4; ++e) st.o[d][e] = 0.0f;
  }
}

// The positions of the block's rows: query_y = {min, max} (warp 0).
template <class T>
__device__ __forceinline__ void QueryRange(const TileArgs& a,
                                           const CudaAttentionSeq& seq,
                                           int row0, int num_rows,
                                           int* query_y) {
  const int lane = threadIdx.x % 32;
  int lo = INT_MAX, hi = INT_MIN;
  for (int r = lane; r < T::kRows; r += 32) {
    if (row0 + r < num_rows) {
      const int y = a.q_meta[seq.first_token + (row0 + r) / a.group].y;
      lo = min(lo, y);
      hi = max(hi, y);
    }
  }
  lo = __reduce_min_sync(kFullMask, lo);
  hi = __reduce_max_sync(kFullMask, hi);
  if (lane == 0) {
    query_y[0] = lo;
    query_y[1] = hi;
  }
}

// Warp 0: the tile's entries [base, base + kKeys) of the sequence's
// context: pool slot (-1 beyond end), tag, flags, and key_y = {min, max}
// of their positions.
template <class T>
__device__ __forceinline__ void LoadEntries(const TileArgs& a,
                                            const CudaAttentionSeq& seq,
                                            int base, int end, int* slots,
                                            CudaEntryMeta* metas, int* flags,
                                            int* key_y) {
  const int lane = threadIdx.x % 32;
  const int32_t* table = a.block_tables + seq.block_table_offset;
  const int32_t* visible = a.visible + seq.visible_offset;
  int lo = INT_MAX, hi = INT_MIN;
  for (int t = lane; t < T::kKeys; t += 32) {
    const int j = base + t;
    int slot = -1, f = 0;
    CudaEntryMeta e{0, 0};
    if (j < end) {
      slot = table[j / a.block_size] * a.block_size + j % a.block_size;
      e = a.kv_meta[slot];
      f = kInSlice |
          (StreamListed(e.stream, visible, seq.num_visible) ? kListed : 0);
      lo = min(lo, e.y);
      hi = max(hi, e.y);
    }
    slots[t] = slot;
    metas[t] = e;
    flags[t] = f;
  }
  lo = __reduce_min_sync(kFullMask, lo);
  hi = __reduce_max_sync(kFullMask, hi);
  if (lane == 0) {
    key_y[0] = lo;
    key_y[1] = hi;
  }
}

// All threads: the K (or V) rows of KV head kvh of the tile's entries into
// dst [kKeys, kKvStride], zeros for entries beyond the slice; one commit.
template <class T>
__device__ __forceinline__ void LoadRowsAsync(const uint16_t* pool,
                                              int64_t entry_stride,
                                              const int* slots, uint16_t* dst) {
  constexpr int kPieces = T::kDim / 8;  // 16 bytes each
  for (int i = threadIdx.x; i < T::kKeys * kPieces; i += T::kThreads) {
    const int t = i / kPieces, piece = i % kPieces;
    const int slot = slots[t];
    const uint16_t* src =
        pool + (slot >= 0 ? int64_t{slot} * entry_stride : 0) + piece * 8;
    CopyAsync16(dst + t * T::kKvStride + piece * 8, src, slot >= 0);
  }
  CopyAsyncCommit();
}

// s = q k^T of the warp's rows and keys (raw dots).
template <class T>
__device__ __forceinline__ void Scores(const RowState<T>& st,
                                       const uint16_t* s_k, int key0,
                                       float s[T::kWarpKeys / 8][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int n = 0; n < T::kWarpKeys / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) s[n][e] = 0.0f;
  }
  // Matrix i of a load: keys + 8 * (i / 2), dims + 8 * (i % 2): B operands
  // of key tiles 2p and 2p + 1.
  const int key = key0 + (lane / 16) * 8 + lane % 8;
  const int dim = ((lane / 8) % 2) * 8;
#pragma unroll
  for (int kk = 0; kk < T::kDim / 16; ++kk) {
#pragma unroll
    for (int p = 0; p < T::kWarpKeys / 16; ++p) {
      uint32_t b[4];
      LoadMatrix4(b, s_k + (key + p * 16) * T::kKvStride + kk * 16 + dim);
      Mma16816(s[2 * p], st.q[kk], b[0], b[1]);
      Mma16816(s[2 * p + 1], st.q[kk], b[2], b[3]);
    }
  }
}

// Masks the scores by the rule, scales them (base 2) and takes them into
// the rows' online softmax: s becomes the weights exp2(s - max).
template <class T>
__device__ __forceinline__ void Softmax(const TileArgs& a,
                                        const CudaEntryMeta* metas,
                                        const int* flags, int key0,
                                        RowState<T>& st,
                                        float s[T::kWarpKeys / 8][4]) {
  const int c = threadIdx.x % 4;
  float row_max[2] = {st.max[0], st.max[1]};
#pragma unroll
  for (int n = 0; n < T::kWarpKeys / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int t = key0 + n * 8 + 2 * c + (e & 1);
      const int i = e >> 1;
      const int f = flags[t];
      const bool seen =
          st.valid[i] && (f & kInSlice) &&
          EntryVisibleListed(st.meta[i], metas[t], f & kListed, a.window);
      float x = s[n][e];
      if (a.softcap > 0.0f) x = a.softcap * tanhf(x / a.softcap);
      x = seen ? x * a.scale_log2 : -INFINITY;
      s[n][e] = x;
      row_max[i] = fmaxf(row_max[i], x);
    }
  }
  float ref[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    // The four lanes of a quad hold one row's keys.
    row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(kFullMask, row_max[i], 1));
    row_max[i] = fmaxf(row_max[i], __shfl_xor_sync(kFullMask, row_max[i], 2));
    // A row that has seen nothing yet keeps weights exp2(-inf) = 0.
    ref[i] = row_max[i] == -INFINITY ? 0.0f : row_max[i];
    const float alpha = exp2f(st.max[i] - ref[i]);
    st.max[i] = row_max[i];
    st.sum[i] *= alpha;
#pragma unroll
    for (int d = 0; d < T::kDim / 8; ++d) {
      st.o[d][2 * i] *= alpha;
      st.o[d][2 * i + 1] *= alpha;
    }
  }
#pragma unroll
  for (int n = 0; n < T::kWarpKeys / 8; ++n) {
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const float p = exp2f(s[n][e] - ref[e >> 1]);
      s[n][e] = p;
      st.sum[e >> 1] += p;
    }
  }
}

// o += p v over the warp's keys (p rounded to fp16 as kernels/cpu rounds
// its weights).
template <class T>
__device__ __forceinline__ void WeightedValues(
    const float p[T::kWarpKeys / 8][4], const uint16_t* s_v, int key0,
    RowState<T>& st) {
  const int lane = threadIdx.x % 32;
  // Matrix i of a load: keys + 8 * (i % 2), dims + 8 * (i / 2), transposed:
  // B operands of dim tiles 2dp and 2dp + 1.
  const int key = key0 + ((lane / 8) % 2) * 8 + lane % 8;
  const int dim = (lane / 16) * 8;
#pragma unroll
  for (int ks = 0; ks < T::kWarpKeys / 16; ++ks) {
    const uint32_t pa[4] = {PackHalf2(p[2 * ks][0], p[2 * ks][1]),
                            PackHalf2(p[2 * ks][2], p[2 * ks][3]),
                            PackHalf2(p[2 * ks + 1][0], p[2 * ks + 1][1]),
                            PackHalf2(p[2 * ks + 1][2], p[2 * ks + 1][3])};
#pragma unroll
    for (int dp = 0; dp < T::kDim / 16; ++dp) {
      uint32_t b[4];
      LoadMatrix4Trans(b, s_v + (key + ks * 16) * T::kKvStride + dp * 16 + dim);
      Mma16816(st.o[2 * dp], pa, b[0], b[1]);
      Mma16816(st.o[2 * dp + 1], pa, b[2], b[3]);
    }
  }
}

// After the last tile: each warp's rows (their sums reduced over the quad)
// into shared memory, outputs into s_o [warps_k, rows, kOStride] and the
// softmax states into s_max and s_sum [warps_k, rows].
template <class T>
__device__ __forceinline__ void StoreWarpState(RowState<T>& st, float* s_o,
                                               float (*s_max)[T::kRows],
                                               float (*s_sum)[T::kRows]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, c = lane % 4;
  const int wq = warp % T::kWarpsQ, wk = warp / T::kWarpsQ;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    st.sum[i] += __shfl_xor_sync(kFullMask, st.sum[i], 1);
    st.sum[i] += __shfl_xor_sync(kFullMask, st.sum[i], 2);
    const int r = wq * 16 + g + 8 * i;
    float* o_row = s_o + (wk * T::kRows + r) * T::kOStride;
#pragma unroll
    for (int d = 0; d < T::kDim / 8; ++d) {
      *reinterpret_cast<float2*>(o_row + d * 8 + 2 * c) =
          make_float2(st.o[d][2 * i], st.o[d][2 * i + 1]);
    }
    if (c == 0) {
      s_max[wk][r] = st.max[i];
      s_sum[wk][r] = st.sum[i];
    }
  }
}

// Merges the warps' key slices (softmax states in
// s_max / s_sum, outputs in s_o) and writes the block's rows: normalised
// into out, or with splits as the split's partial rows and their
// log-sum-exp (base 2).
template <class T>
__device__ __forceinline__ void WriteRows(const TileArgs& a,
                                          const CudaAttentionSeq& seq, int kvh,
                                          int row0, int num_rows,
                                          const float* s_o,
                                          const float (*s_max)[T::kRows],
                                          const float (*s_sum)[T::kRows]) {
  constexpr int kQuads = T::kDim / 4;
  for (int i = threadIdx.x; i < T::kRows * kQuads; i += T::kThreads) {
    const int r = i / kQuads, d = (i % kQuads) * 4;
    const int row = row0 + r;
    if (row >= num_rows) continue;
    float max = -INFINITY;
#pragma unroll
    for (int w = 0; w < T::kWarpsK; ++w) max = fmaxf(max, s_max[w][r]);
    const float ref = max == -INFINITY ? 0.0f : max;
    float sum = 0.0f;
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int w = 0; w < T::kWarpsK; ++w) {
      const float f = exp2f(s_max[w][r] - ref);
      const float4 x = *reinterpret_cast<const float4*>(
          s_o + (w * T::kRows + r) * T::kOStride + d);
      sum += f * s_sum[w][r];
      acc.x += f * x.x;
      acc.y += f * x.y;
      acc.z += f * x.z;
      acc.w += f * x.w;
    }
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    acc = make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    if (a.splits == 1) {
      const int token = seq.first_token + row / a.group;
      const int head = kvh * a.group + row % a.group;
      *reinterpret_cast<float4*>(
          a.out + (int64_t{token} * a.n_head + head) * T::kDim + d) = acc;
    } else {
      const int64_t at =
          blockIdx.z * a.part_rows +
          (int64_t{blockIdx.y} * gridDim.x + blockIdx.x) * T::kRows + r;
      *reinterpret_cast<float4*>(a.part_o + at * T::kDim + d) = acc;
      if (d == 0) a.part_lse[at] = sum > 0.0f ? max + log2f(sum) : -INFINITY;
    }
  }
}

// Block (blockIdx.x: tile of query rows, blockIdx.y: sequence x KV head,
// blockIdx.z: context split). Per tile of entries: tags (warp 0), a
// barrier, then, unless no row can see the tile, K and V rows (cp.async,
// V still in flight while the scores are computed), scores, softmax,
// weighted V sum, a barrier.
template <class T>
__global__ void __launch_bounds__(T::kThreads)
    AttentionTileKernel(const TileArgs a) {
  AwaitPrerequisiteGrids();
  extern __shared__ __align__(16) unsigned char smem[];
  uint16_t* s_k = reinterpret_cast<uint16_t*>(smem);
  uint16_t* s_v = s_k + T::kKeys * T::kKvStride;
  float* s_o = reinterpret_cast<float*>(smem);
  __shared__ int s_slot[T::kKeys];
  __shared__ CudaEntryMeta s_meta[T::kKeys];
  __shared__ int s_flags[T::kKeys];
  // Per tile parity: a warp may still read a skipped tile's range while
  // warp 0 writes the next one's.
  __shared__ int s_key_y[2][2];
  __shared__ int s_query_y[2];
  __shared__ float s_max[T::kWarpsK][T::kRows];
  __shared__ float s_sum[T::kWarpsK][T::kRows];

  const int seq_index = blockIdx.y / a.n_kv_head;
  const int kvh = blockIdx.y % a.n_kv_head;
  const CudaAttentionSeq seq = a.seqs[seq_index];
  const int num_rows = seq.num_tokens * a.group;
  const int row0 = blockIdx.x * T::kRows;
  if (row0 >= num_rows) return;  // (the combine skips these rows too)
  const int per_split = (seq.num_ctx + a.splits - 1) / a.splits;
  const int slice = (per_split + T::kKeys - 1) / T::kKeys * T::kKeys;
  const int begin = blockIdx.z * slice;
  const int end = min(seq.num_ctx, begin + slice);

  const int warp = threadIdx.x / 32;
  const int key0 = (warp / T::kWarpsQ) * T::kWarpKeys;
  RowState<T> st;
  LoadRows<T>(a, seq, kvh, row0, num_rows, st);
  if (warp == 0) QueryRange<T>(a, seq, row0, num_rows, s_query_y);
  const int64_t entry_stride = int64_t{a.n_kv_head} * T::kDim;
  const uint16_t* k_head = a.k + kvh * T::kDim;
  const uint16_t* v_head = a.v + kvh * T::kDim;
  int parity = 0;
  for (int base = begin; base < end; base += T::kKeys, parity ^= 1) {
    if (warp == 0) {
      LoadEntries<T>(a, seq, base, end, s_slot, s_meta, s_flags,
                     s_key_y[parity]);
    }
    __syncthreads();
    if (!TileMayBeSeen(s_key_y[parity], s_query_y, a.window)) continue;
    LoadRowsAsync<T>(k_head, entry_stride, s_slot, s_k);
    LoadRowsAsync<T>(v_head, entry_stride, s_slot, s_v);
    CopyAsyncWait<1>();  // K
    __syncthreads();
    float s[T::kWarpKeys / 8][4];
    Scores<T>(st, s_k, key0, s);
    Softmax<T>(a, s_meta, s_flags, key0, st, s);
    CopyAsyncWait<0>();  // V
    __syncthreads();
    WeightedValues<T>(s, s_v, key0, st);
    __syncthreads();  // before the next tile overwrites K, V and the tags
  }

  // The tiles' space is free: every tile that was read ended with a
  // barrier.
  StoreWarpState<T>(st, s_o, s_max, s_sum);
  __syncthreads();
  WriteRows<T>(a, seq, kvh, row0, num_rows, s_o, s_max, s_sum);
}

// ---- The combine kernel -------------------------------------------------

struct CombineArgs {
  const float* part_o;
  const float* part_lse;
  const CudaAttentionSeq* seqs;
  float* out;
  int64_t part_rows;
  int splits, block_rows, q_tiles, n_kv_head, n_head, group, head_dim;
};

constexpr int kCombineWarps = 4;

// One warp per partial row: out = sum_z w_z o_z / sum_z w_z with
// w_z = exp2(lse_z - max lse); empty splits (lse -inf) weigh 0.
__global__ void __launch_bounds__(kCombineWarps * 32)
    CombineKernel(const CombineArgs a) {
  AwaitPrerequisiteGrids();
  const int64_t prow = int64_t{blockIdx.x} * kCombineWarps + threadIdx.x / 32;
  if (prow >= a.part_rows) return;
  const int lane = threadIdx.x % 32;
  int64_t rest = prow / a.block_rows;
  const int row = static_cast<int>(rest % a.q_tiles) * a.block_rows +
                  static_cast<int>(prow % a.block_rows);
  rest /= a.q_tiles;
  const int kvh = static_cast<int>(rest % a.n_kv_head);
  const CudaAttentionSeq seq = a.seqs[rest / a.n_kv_head];
  if (row >= seq.num_tokens * a.group) return;
  float max = -INFINITY;
  for (int z = 0; z < a.splits; ++z) {
    max = fmaxf(max, a.part_lse[z * a.part_rows + prow]);
  }
  const float ref = max == -INFINITY ? 0.0f : max;
  float sum = 0.0f;
  for (int z = 0; z < a.splits; ++z) {
    sum += exp2f(a.part_lse[z * a.part_rows + prow] - ref);
  }
  const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
  const int token = seq.first_token + row / a.group;
  const int head = kvh * a.group + row % a.group;
  float* out = a.out + (int64_t{token} * a.n_head + head) * a.head_dim;
  for (int d = lane * 4; d < a.head_dim; d += 32 * 4) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int z = 0; z < a.splits; ++z) {
      const int64_t at = z * a.part_rows + prow;
      const float w = exp2f(a.part_lse[at] - ref) * inv;
      const float4 x =
          *reinterpret_cast<const float4*>(a.part_o + at * a.head_dim + d);
      acc.x += w * x.x;
      acc.y += w * x.y;
      acc.z += w * x.z;
      acc.w += w * x.w;
    }
    *reinterpret_cast<float4*>(out + d) = acc;
  }
}

// ---- Launch -------------------------------------------------------------

template <class T>
cudaError_t LaunchTiles(const TileArgs& args, const AttentionPlan& plan,
                        int pairs, cudaStream_t stream) {
  const auto kernel = AttentionTileKernel<T>;
  if (T::kSmemBytes > 48 * 1024) {
    const cudaError_t err = cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, T::kSmemBytes);
    if (err != cudaSuccess) return err;
  }
  const dim3 grid(plan.q_tiles, pairs, plan.splits);
  return Launch(kernel, grid, T::kThreads, T::kSmemBytes, stream, args);
}

template <int head_dim>
cudaError_t LaunchHeadDim(const TileArgs& args, const AttentionPlan& plan,
                          int pairs, cudaStream_t stream) {
  return plan.decode
             ? LaunchTiles<DecodeTile<head_dim>>(args, plan, pairs, stream)
             : LaunchTiles<PrefillTile<head_dim>>(args, plan, pairs, stream);
}

TileArgs MakeTileArgs(const CudaAttentionShape& shape,
                      const CudaPagedKvLayer& kv,
                      const CudaAttentionBatch& batch,
                      const AttentionPlan& plan, const float* q, float* out,
                      void* workspace) {
  const float scale = shape.scale > 0.0f
                          ? shape.scale
                          : 1.0f / sqrtf(static_cast<float>(shape.head_dim));
  TileArgs a;
  a.q = q;
  a.out = out;
  a.k = kv.k;
  a.v = kv.v;
  a.kv_meta = kv.meta;
  a.q_meta = batch.q_meta;
  a.seqs = batch.seqs;
  a.block_tables = batch.block_tables;
  a.visible = batch.visible;
  a.part_rows = PartialRows(plan, batch.n_seq, shape.n_kv_head);
  a.part_o = plan.splits > 1 ? static_cast<float*>(workspace) : nullptr;
  a.part_lse = plan.splits > 1
                   ? a.part_o + plan.splits * a.part_rows * shape.head_dim
                   : nullptr;
  a.n_head = shape.n_head;
  a.n_kv_head = shape.n_kv_head;
  a.group = shape.n_head / shape.n_kv_head;
  a.block_size = shape.block_size;
  a.window = shape.window;
  a.splits = plan.splits;
  a.scale_log2 = scale * kLog2e;
  a.softcap = shape.softcap;
  return a;
}

cudaError_t LaunchCombine(const TileArgs& t, const AttentionPlan& plan,
                          int head_dim, cudaStream_t stream) {
  CombineArgs c;
  c.part_o = t.part_o;
  c.part_lse = t.part_lse;
  c.seqs = t.seqs;
  c.out = t.out;
  c.part_rows = t.part_rows;
  c.splits = plan.splits;
  c.block_rows = plan.block_rows;
  c.q_tiles = plan.q_tiles;
  c.n_kv_head = t.n_kv_head;
  c.n_head = t.n_head;
  c.group = t.group;
  c.head_dim = head_dim;
  const int64_t blocks = (t.part_rows + kCombineWarps - 1) / kCombineWarps;
  return Launch(CombineKernel, static_cast<unsigned>(blocks),
                kCombineWarps * 32, 0, stream, c);
}

}  // namespace

namespace internal {

int LaunchPagedAttention(const CudaAttentionShape& shape,
                         const CudaPagedKvLayer& kv,
                         const CudaAttentionBatch& batch,
                         const AttentionPlan& plan, const float* q, float* out,
                         void* workspace, void* stream) {
  if (batch.n_seq == 0 || plan.q_tiles == 0) return cudaSuccess;
  const cudaStream_t s = static_cast<cudaStream_t>(stream);
  const TileArgs args = MakeTileArgs(shape, kv, batch, plan, q, out, workspace);
  const int pairs = batch.n_seq * shape.n_kv_head;
  cudaError_t err = cudaErrorInvalidValue;
  switch (shape.head_dim) {
    case 64:
      err = LaunchHeadDim<64>(args, plan, pairs, s);
      break;
    case 128:
      err = LaunchHeadDim<128>(args, plan, pairs, s);
      break;
    case 256:
      err = LaunchHeadDim<256>(args, plan, pairs, s);
      break;
  }
  if (err != cudaSuccess || plan.splits == 1) return err;
  return LaunchCombine(args, plan, shape.head_dim, s);
}

}  // namespace internal
}  // namespace braid::kernels::cuda
