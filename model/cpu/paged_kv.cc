#include "model/cpu/paged_kv.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>

namespace braid::model {
namespace {

// K or V storage of n elements, zeroed: fresh anonymous pages, so memory is
// committed only as blocks are first written (a large pool costs what it
// holds; braidd's default 512 MB pool made it a ~635 MB process before any
// request), and page-aligned, so rows (kv_dim fp16) start on cache lines: a
// std::vector's large allocation starts 16 bytes into a page, so a head's
// 128-byte row took three lines and half the attention kernels' 32-byte
// loads straddled two (long-context decode attention ran 1.7x slower). Not
// advised as huge pages: no faster in llama_bench, and a layer region's
// first write would commit 2 MiB (RSS 198 -> 503 MiB there).
PagedKvPool::Rows AllocateRows(size_t n) {
  const size_t bytes = n * sizeof(uint16_t);
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) std::abort();  // As std::vector would throw.
  return PagedKvPool::Rows(static_cast<uint16_t*>(p), KvRowsUnmap{p, bytes});
}

}  // namespace

int64_t PagedKvPool::BlockBytes(int n_layer, int kv_dim, int block_size) {
  const int64_t kv = int64_t{2} * n_layer * kv_dim * sizeof(uint16_t);
  return (kv + static_cast<int64_t>(sizeof(KvEntryMeta))) * block_size;
}

void KvRowsUnmap::operator()(uint16_t*) const {
  if (base != nullptr) munmap(base, bytes);
}

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
  k_ = AllocateRows(n);
  v_ = AllocateRows(n);
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
