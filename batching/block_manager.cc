#include "batching/block_manager.h"

#include <algorithm>
#include <cassert>

namespace braid::batching {

BlockManager::BlockManager(int num_blocks, int block_size)
    : block_size_(block_size), blocks_(num_blocks), num_free_(num_blocks) {
  fresh_.reserve(num_blocks);
  // Popped from the back: block 0 is handed out first.
  for (int32_t b = num_blocks - 1; b >= 0; --b) fresh_.push_back(b);
}

BlockManagerStats BlockManager::stats() const {
  BlockManagerStats s;
  s.num_blocks = num_blocks();
  s.num_free_blocks = num_free_;
  s.num_cached_blocks = static_cast<int>(cached_.size());
  s.num_evictions = num_evictions_;
  s.num_hit_blocks = num_hit_blocks_;
  return s;
}

uint64_t BlockManager::ChainHash(uint64_t parent_hash,
                                 absl::Span<const int32_t> tokens) {
  // FNV-1a over the parent hash and the token ids, then a final mix.
  uint64_t h = 0xcbf29ce484222325ull ^ parent_hash;
  auto mix = [&h](uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xff;
      h *= 0x100000001b3ull;
    }
  };
  mix(parent_hash);
  for (int32_t t : tokens) mix(static_cast<uint32_t>(t));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  return h;
}

int32_t BlockManager::Find(uint64_t hash, uint64_t parent_hash,
                           absl::Span<const int32_t> key) const {
  auto it = cached_.find(hash);
  if (it == cached_.end()) return -1;
  const Block& b = blocks_[it->second];
  if (b.parent_hash != parent_hash || b.tokens.size() != key.size() ||
      !std::equal(b.tokens.begin(), b.tokens.end(), key.begin())) {
    return -1;  // a hash collision: treat as a miss
  }
  return it->second;
}

void BlockManager::Reference(int32_t block) {
  Block& b = blocks_[block];
  if (b.ref_count == 0) {
    UnlinkEvictable(block);
    --num_free_;
  }
  ++b.ref_count;
}

int BlockManager::AcquireCachedPrefix(absl::Span<const int32_t> tokens,
                                      int max_blocks,
                                      std::vector<int32_t>* blocks,
                                      std::vector<uint64_t>* hashes) {
  uint64_t parent = kRootHash;
  int n = 0;
  for (; n < max_blocks; ++n) {
    if (static_cast<int>(tokens.size()) < (n + 1) * block_size_) break;
    auto content = tokens.subspan(n * block_size_, block_size_);
    const uint64_t h = ChainHash(parent, content);
    const int32_t id = Find(h, parent, content);
    if (id < 0) break;
    Reference(id);
    blocks->push_back(id);
    hashes->push_back(h);
    parent = h;
  }
  num_hit_blocks_ += n;
  return n;
}

int32_t BlockManager::AcquireCached(uint64_t parent_hash,
                                    absl::Span<const int32_t> key,
                                    uint64_t* hash) {
  const uint64_t h = ChainHash(parent_hash, key);
  const int32_t id = Find(h, parent_hash, key);
  if (id < 0) return -1;
  Reference(id);
  ++num_hit_blocks_;
  *hash = h;
  return id;
}

int32_t BlockManager::TakeCached(uint64_t parent_hash,
                                 absl::Span<const int32_t> key) {
  const int32_t id = Find(ChainHash(parent_hash, key), parent_hash, key);
  if (id < 0 || blocks_[id].ref_count != 0) return -1;
  Reference(id);
  Uncache(id);
  ++num_hit_blocks_;
  return id;
}

bool BlockManager::Allocate(int n, std::vector<int32_t>* blocks) {
  if (n > num_free_) return false;
  for (int i = 0; i < n; ++i) {
    int32_t id;
    if (!fresh_.empty()) {
      id = fresh_.back();
      fresh_.pop_back();
    } else {
      id = lru_head_;
      assert(id >= 0);
      UnlinkEvictable(id);
      Uncache(id);
      ++num_evictions_;
    }
    blocks_[id].ref_count = 1;
    --num_free_;
    blocks->push_back(id);
  }
  return true;
}

uint64_t BlockManager::Commit(int32_t block, uint64_t parent_hash,
                              absl::Span<const int32_t> tokens) {
  const uint64_t h = ChainHash(parent_hash, tokens);
  Block& b = blocks_[block];
  if (b.cached) return b.hash;
  if (cached_.contains(h)) return h;  // another block holds this prefix
  b.cached = true;
  b.hash = h;
  b.parent_hash = parent_hash;
  b.tokens.assign(tokens.begin(), tokens.end());
  cached_[h] = block;
  return h;
}

void BlockManager::Release(absl::Span<const int32_t> blocks) {
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) {
    Block& b = blocks_[*it];
    assert(b.ref_count > 0);
    if (--b.ref_count > 0) continue;
    ++num_free_;
    if (b.cached) {
      PushEvictable(*it);
    } else {
      fresh_.push_back(*it);
    }
  }
}

void BlockManager::PushEvictable(int32_t block) {
  Block& b = blocks_[block];
  b.prev = lru_tail_;
  b.next = -1;
  if (lru_tail_ >= 0) {
    blocks_[lru_tail_].next = block;
  } else {
    lru_head_ = block;
  }
  lru_tail_ = block;
}

void BlockManager::UnlinkEvictable(int32_t block) {
  Block& b = blocks_[block];
  if (b.prev >= 0) {
    blocks_[b.prev].next = b.next;
  } else {
    lru_head_ = b.next;
  }
  if (b.next >= 0) {
    blocks_[b.next].prev = b.prev;
  } else {
    lru_tail_ = b.prev;
  }
  b.prev = b.next = -1;
}

void BlockManager::Uncache(int32_t block) {
  Block& b = blocks_[block];
  if (!b.cached) return;
  cached_.erase(b.hash);
  b.cached = false;
  b.tokens.clear();
}

}  // namespace braid::batching
