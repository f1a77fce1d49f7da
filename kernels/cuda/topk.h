// Rows of logits reduced on the GPU to what a sampler needs: each row's k
// largest logits with their token ids, in order, and the row's log-partition
// log_z (so that p(id) = exp(value - log_z) without the full row). The
// sampler then copies k entries a row to the host instead of n_vocab.
//
// Design (one thread block a row, at most 1024 threads, any vocabulary
// size). Each float maps to a uint32 key whose unsigned order is the float
// order (-0.0 canonicalised to +0.0, so the two are one value). A radix
// select finds the k-th largest key T in four passes over the row, each an
// 8-bit histogram in shared memory of the entries that match the digits
// found so far; it leaves r, how many entries equal to T belong to the k.
// The k - r entries above T are gathered into shared memory in any order;
// the r entries equal to T with the lowest ids are taken by a walk of the
// row in id order, blockDim entries at a time, each entry placed by a
// block-wide prefix count, so the walk ends once r are found. Each thread
// then ranks its gathered entries by counting those that precede them
// (O(k^2) in shared memory, at most 1M comparisons a row, no sort
// network to get wrong) and writes them to their rank. Ties in value are
// broken by id, lowest first, so results are exactly reproducible.
// log_z's max comes from the first histogram pass and its sum of exp(x -
// max) from the gathering pass: each thread accumulates in fp32 with Kahan
// compensation, the block adds the threads' sums in fp64. A row's logits
// are read five times, plus the tie walk's prefix of the row (a 64-row batch
// of a 128k vocabulary, 33 MB, stays in an H100's L2).
//
// This header has no device code (the kernel is in topk.cu). TopKLogits is
// thread-safe: it only enqueues work on the caller's stream.
#ifndef BRAID_KERNELS_CUDA_TOPK_H_
#define BRAID_KERNELS_CUDA_TOPK_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace braid::kernels::cuda {

// The most entries TopKLogits keeps per row.
inline constexpr int kMaxTopK = 1024;

// For each of n_rows rows of logits [n_rows, n_vocab] (f32, row-major): its
// k largest entries ordered by value descending, then id ascending on equal
// values (-0.0f equals +0.0f), into ids [n_rows, k] (int32) and values
// [n_rows, k] (f32, the logits as they are, -0.0f included); and log_z
// [n_rows] = log(sum_i exp(row[i])), computed stably as max + log(sum
// exp(x - max)) (+inf when the row holds +inf, -inf when every entry is
// -inf). Rows hold no NaN (the caller's contract; not checked: a NaN gives
// unspecified results but no access outside the arrays). All arrays are
// device memory.
//
// One kernel launch on `stream`, asynchronous: allocates nothing, reads
// nothing on the host, synchronises nothing, so it can be captured in a
// CUDA graph; a fault inside the kernel surfaces at the caller's next
// synchronisation. InvalidArgument for n_rows < 0, n_vocab < 1, k < 1,
// k > min(n_vocab, kMaxTopK), or a null array (even with n_rows == 0);
// else n_rows == 0 does nothing; the launch's CUDA error as CudaStatus
// (kernels/cuda/status.h) maps it.
absl::Status TopKLogits(const float* logits, int n_rows, int n_vocab, int k,
                        int32_t* ids, float* values, float* log_z,
                        cudaStream_t stream);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_TOPK_H_
