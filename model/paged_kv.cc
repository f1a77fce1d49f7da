#include "model/paged_kv.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace braid::model {
namespace {

// K or V storage of n elements, zeroed. Aligned to 2 MiB and advised as
// transparent huge pages: rows (kv_dim fp16) then start on cache lines
// (a std::vector's large allocation starts 16 bytes into a page, so a head's
// 128-byte row took three lines and half the attention kernels' 32-byte
// loads straddled two: long-context decode attention ran 1.7x slower), and
// reading a long context touches few TLB entries.
uint16_t* AllocateRows(size_t n) {
  constexpr size_t kAlign = size_t{2} << 20;
  const size_t bytes = (n * sizeof(uint16_t) + kAlign - 1) / kAlign * kAlign;
  void* p = std::aligned_alloc(kAlign, bytes);
  if (p == nullptr) std::abort();  // As std::vector would throw.
  madvise(p, bytes, MADV_HUGEPAGE);  // Advice only: failure is harmless.
  std::memset(p, 0, bytes);
  return static_cast<uint16_t*>(p);
}

int64_t BlockBytes(int n_layer, int kv_dim, int block_size) {
  const int64_t kv = int64_t{2} * n_layer * kv_dim * sizeof(uint16_t);
  return (kv + static_cast<int64_t>(sizeof(EntryMeta))) * block_size;
}

}  // namespace

PagedKvPool::PagedKvPool(int n_layer, int kv_dim, int block_size,
                         int num_blocks)
    : n_layer_(n_layer),
      kv_dim_(kv_dim),
      block_size_(block_size),
      num_blocks_(num_blocks) {
  if (n_layer <= 0 || kv_dim <= 0 || block_size <= 0 || num_blocks <= 0) {
    std::abort();  // A caller bug: shapes come from the model config.
  }
  const size_t n = static_cast<size_t>(n_layer) * num_blocks * block_size *
                   static_cast<size_t>(kv_dim);
  k_.reset(AllocateRows(n));
  v_.reset(AllocateRows(n));
  meta_.resize(static_cast<size_t>(num_blocks) * block_size);
}

int PagedKvPool::BlocksForBudget(int n_layer, int kv_dim, int block_size,
                                 int64_t bytes) {
  if (n_layer <= 0 || kv_dim <= 0 || block_size <= 0 || bytes <= 0) return 0;
  const int64_t blocks = bytes / BlockBytes(n_layer, kv_dim, block_size);
  return static_cast<int>(std::min<int64_t>(blocks, 1 << 30));
}

int64_t PagedKvPool::bytes() const {
  return BlockBytes(n_layer_, kv_dim_, block_size_) * num_blocks_;
}

}  // namespace braid::model
