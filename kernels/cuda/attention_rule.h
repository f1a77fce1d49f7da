// The visibility rule of docs/MULTISTREAM.md as the CUDA attention kernels
// evaluate it, on the host and on the device.
//
// A query (s, y) of a sequence sees a context entry (s', y') iff
//   (s' == s and y' <= y) or (s' in the sequence's visible streams and
//   y' < y),
// and, with a sliding window w > 0, also y - y' < w. kernels/cpu's
// EntryVisible (kernels/cpu/attention/attention.h) is the oracle:
// attention_rule_test checks these functions against it exhaustively over a
// small grid.
//
// The rule is split in two so a kernel evaluates the list part once per
// entry, not once per (query, entry) pair: whether the entry's stream is in
// the sequence's list depends only on the entry (StreamListed), the rest on
// both tags (EntryVisibleListed).
//
// Header only; compiles with the host compiler and with nvcc (<cstdint>
// only, no CUDA, absl or kernels/cpu headers). Pure and thread-safe.
#ifndef BRAID_KERNELS_CUDA_ATTENTION_RULE_H_
#define BRAID_KERNELS_CUDA_ATTENTION_RULE_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/host_device.h"

namespace braid::kernels::cuda {

// Where a KV entry (or a query token) sits in the multi-stream layout: its
// stream and its position y. The layout of kernels/cpu's KvEntryMeta, so the
// engine's metadata arrays copy to the device unchanged.
struct CudaEntryMeta {
  int32_t stream;
  int32_t y;
};
static_assert(sizeof(CudaEntryMeta) == 8, "two int32 fields, no padding");
static_assert(offsetof(CudaEntryMeta, stream) == 0 &&
                  offsetof(CudaEntryMeta, y) == 4,
              "laid out as kernels/cpu's KvEntryMeta");

// Whether a sliding window of `window` positions (> 0; 0: none) hides entry
// e from query q: llama.cpp's window, masked when y - y' >= window.
BRAID_HD bool OutsideWindow(CudaEntryMeta q, CudaEntryMeta e, int32_t window) {
  return window > 0 && int64_t{q.y} - e.y >= window;
}

// Whether `stream` is one of streams[0, n).
BRAID_HD bool StreamListed(int32_t stream, const int32_t* streams, int32_t n) {
  for (int32_t i = 0; i < n; ++i) {
    if (streams[i] == stream) return true;
  }
  return false;
}

// The rule with the list part given: `listed` is whether e's stream is in
// the query's sequence's visible streams (StreamListed).
BRAID_HD bool EntryVisibleListed(CudaEntryMeta q, CudaEntryMeta e, bool listed,
                                 int32_t window) {
  if (OutsideWindow(q, e, window)) return false;
  if (e.stream == q.stream) return e.y <= q.y;
  return listed && e.y < q.y;
}

// Whether query q sees entry e, for a sequence whose visible streams
// (besides the query's own) are visible[0, num_visible).
BRAID_HD bool EntryVisible(CudaEntryMeta q, CudaEntryMeta e,
                           const int32_t* visible, int32_t num_visible,
                           int32_t window) {
  return EntryVisibleListed(q, e, StreamListed(e.stream, visible, num_visible),
                            window);
}

}  // namespace braid::kernels::cuda

#endif  // BRAID_KERNELS_CUDA_ATTENTION_RULE_H_
