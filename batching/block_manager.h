// Host-side bookkeeping of the paged KV cache: which blocks are free, who
// references them, and which hold reusable prefix content.
//
// The KV pool (model::PagedKvPool) is plain storage of `num_blocks` blocks of
// `block_size` entries. This class decides who may write where:
//
// - Reference counts. A block is held by every sequence whose block table
//   lists it; it returns to the free pool when the last one releases it.
// - Prefix reuse. Once a block is full and computed, its content is keyed by
//   a hash chained to its prefix (the hash of the previous block and its own
//   tokens, as in vLLM's prefix caching), so a hash names a whole prefix, not
//   one block. A later sequence whose tokens start with the same prefix takes
//   a reference to those blocks instead of computing them again. The tokens
//   are stored beside the hash and compared on lookup, so a hash collision
//   can never hand out wrong content.
// - Eviction. A free block that still holds cached content stays findable
//   until its storage is needed: allocation takes never-cached free blocks
//   first, then evicts cached ones least recently released first.
//
// Running out of blocks is a normal answer (Allocate returns false); the
// scheduler then preempts. Owned by the Scheduler; engine thread only; not
// thread-safe.
#ifndef BRAID_BATCHING_BLOCK_MANAGER_H_
#define BRAID_BATCHING_BLOCK_MANAGER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace braid::batching {

struct BlockManagerStats {
  int num_blocks = 0;
  int num_free_blocks = 0;    // ref count 0 (never cached or evictable)
  int num_cached_blocks = 0;  // holding prefix content, referenced or not
  int64_t num_evictions = 0;
  int64_t num_hit_blocks = 0;  // blocks handed out by prefix lookups
};

class BlockManager {
 public:
  // The hash that starts every chain.
  static constexpr uint64_t kRootHash = 0x9e3779b97f4a7c15ull;

  BlockManager(int num_blocks, int block_size);

  int block_size() const { return block_size_; }
  int num_blocks() const { return static_cast<int>(blocks_.size()); }
  int num_free_blocks() const { return num_free_; }
  int num_used_blocks() const { return num_blocks() - num_free_; }
  BlockManagerStats stats() const;

  // Takes references to the longest run of cached blocks that holds the
  // start of `tokens`, at most `max_blocks` of them, and appends their ids
  // to `blocks` and their chain hashes to `hashes`. Returns how many.
  int AcquireCachedPrefix(absl::Span<const int32_t> tokens, int max_blocks,
                          std::vector<int32_t>* blocks,
                          std::vector<uint64_t>* hashes);

  // Appends `n` fresh blocks (ref count 1) to `blocks`, evicting cached
  // content if needed; false (and no change) when fewer than `n` are free.
  bool Allocate(int n, std::vector<int32_t>* blocks);

  // Records that `block` is full and holds `tokens` (block_size of them)
  // after the prefix named by `parent_hash`; returns the block's chain hash.
  // If an identical prefix is already cached in another block, that one
  // stays the cached copy and `block` remains private.
  //
  // `tokens` may also be any other key that names the block's content (a
  // kept session's blocks are keyed by tokens, (stream, y) tags and
  // visibility; Scheduler::Keep): lookups compare the whole key.
  uint64_t Commit(int32_t block, uint64_t parent_hash,
                  absl::Span<const int32_t> tokens);

  // One block by key (after AcquireCachedPrefix, for content keyed other
  // than by plain tokens): takes a reference to the block cached under
  // ChainHash(parent_hash, key) whose key is `key`, sets `*hash`, and
  // returns its id; -1 when there is none.
  int32_t AcquireCached(uint64_t parent_hash, absl::Span<const int32_t> key,
                        uint64_t* hash);
  // Like AcquireCached for a block its taker will write into (a partial
  // last block): the block must be unreferenced, and it leaves the cache,
  // so nobody else can find content that is about to change.
  int32_t TakeCached(uint64_t parent_hash, absl::Span<const int32_t> key);

  // Drops one reference to each block. Blocks are released last to first,
  // so a sequence's tail is evicted before its (more shareable) head.
  void Release(absl::Span<const int32_t> blocks);

  int ref_count(int32_t block) const { return blocks_[block].ref_count; }

  static uint64_t ChainHash(uint64_t parent_hash,
                            absl::Span<const int32_t> tokens);

 private:
  struct Block {
    int ref_count = 0;
    bool cached = false;  // registered under `hash`
    uint64_t hash = 0;
    uint64_t parent_hash = 0;
    std::vector<int32_t> tokens;  // content, when cached
    // Links of the evictable list (cached and free), -1 = none.
    int32_t prev = -1, next = -1;
  };

  // The cached block under `hash` holding exactly `key` after
  // `parent_hash`, or -1.
  int32_t Find(uint64_t hash, uint64_t parent_hash,
               absl::Span<const int32_t> key) const;
  void Reference(int32_t block);
  void PushEvictable(int32_t block);  // at the most-recent end
  void UnlinkEvictable(int32_t block);
  void Uncache(int32_t block);

  const int block_size_;
  std::vector<Block> blocks_;
  std::vector<int32_t> fresh_;  // free and never cached (or uncached)
  int32_t lru_head_ = -1, lru_tail_ = -1;  // evictable: oldest at head
  int num_free_ = 0;
  absl::flat_hash_map<uint64_t, int32_t> cached_;  // chain hash -> block
  int64_t num_evictions_ = 0;
  int64_t num_hit_blocks_ = 0;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_BLOCK_MANAGER_H_
