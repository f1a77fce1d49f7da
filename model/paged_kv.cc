#include "model/paged_kv.h"

#include <algorithm>
#include <cstdlib>

namespace braid::model {
namespace {

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
  k_.resize(n);
  v_.resize(n);
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
