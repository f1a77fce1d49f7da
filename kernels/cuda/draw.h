// Temperature draws over whole logits rows on the GPU, so that a request
// sampling with a temperature and no top-k (the OpenAI API's default) gets
// its token without its row leaving the device. The draw is batching's
// Sampler::Draw without top-k, top-p, min-p or penalties
// (model::DrawInIdOrder is the host's): p = softmax(row * inv_temperature),
// walked in id order until the running sum passes u * sum(p), u in [0, 1)
// drawn by the request's generator on the host. Sums are taken in another
// order than the host's, so a u within rounding of a boundary between two
// tokens may pick the other one.
//
// This header has no device code (draw.cu). Thread-safe: it only enqueues
// work on the caller's stream.
#ifndef BRAID_KERNELS_CUDA_DRAW_H_
#define BRAID_KERNELS_CUDA_DRAW_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"

namespace braid::kernels::cuda {

// One row's draw: inv_temperature 0 draws nothing (the row's token comes
// from elsewhere); u < 0 draws nothing but the row's softmax denominator
// (a nucleus the host draws).
struct CudaRowDraw {
  float inv_temperature = 0.0f;
  double u = 0.0;
};

// For each of n_rows rows of logits [n_rows, n_vocab] (f32, row-major, no
// NaN) and its draws[row] (device memory): the drawn id into drawn[row] and
// the row's logit there into drawn_logit[row] (-1 and 0 where the row draws
// nothing), and into sums[row] its softmax denominator at the temperature,
// sum_i exp(x_i * t - max_j x_j * t) in double (0 where inv_temperature is
// 0; model::NucleusSum is the host's, summed in another order). One kernel
// launch on `stream`, asynchronous, no allocation: capturable.
// InvalidArgument for n_rows < 0, n_vocab < 1 or a null array.
absl::Status DrawRows(const float* logits, int n_rows, int n_vocab,
                      const CudaRowDraw* draws, int32_t* drawn,
                      float* drawn_logit, double* sums, cudaStream_t stream);

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_DRAW_H_
