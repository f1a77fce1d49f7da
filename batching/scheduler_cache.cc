// The scheduler's use of the prefix cache (BlockManager): attaching cached
// prefix blocks to a request, committing its full blocks, and keeping a
// closed session's blocks for its resumption.
#include <algorithm>
#include <utility>
#include <vector>

#include "batching/scheduler.h"
#include "batching/scheduler_request.h"

namespace braid::batching {

bool Scheduler::AttachCachedPrefix(Request& r) {
  if (r.remaining() <= 0) return false;  // nothing to compute
  // Kept blocks lie past the prefix (a context that is all prefix, a
  // Generate request's, has none).
  if (r.num_prompt_tokens < static_cast<int>(r.tokens.size()) &&
      AttachKeptSession(r)) {
    return true;
  }
  const int bs = options_.block_size;
  // Leave at least one token to compute: its logits give the next token.
  int max_blocks = (static_cast<int>(r.tokens.size()) - 1) / bs;
  max_blocks = std::min(max_blocks, r.num_prompt_tokens / bs);
  const int n = blocks_.AcquireCachedPrefix(r.tokens, max_blocks,
                                            &r.block_table, &r.block_hashes);
  if (n == 0) return false;
  r.num_computed = n * bs;
  return true;
}

// Design note. A kept session's blocks past its prefix hold entries whose
// K/V depend on their (stream, y) tags and on what their streams see, not on
// tokens alone, so they are keyed by all three (chained to the blocks before
// them, as prefix blocks are); ordinary requests, keyed by tokens, never
// match them. The partial last block is kept too, so a resumed session
// computes exactly what it would have computed had it never been closed;
// whoever takes it back owns it alone (TakeCached), since it writes on into
// it. Eviction works on these blocks like on any cached block, tail first.
std::vector<int32_t> Scheduler::SessionBlockKey(const Request& r, int first,
                                                int n) const {
  std::vector<int32_t> key;
  key.reserve(1 + 3 * n + 8);
  key.push_back(n);
  key.insert(key.end(), r.tokens.begin() + first, r.tokens.begin() + first + n);
  std::vector<int32_t> streams;
  for (int i = first; i < first + n; ++i) {
    key.push_back(r.meta[i].stream);
    key.push_back(r.meta[i].y);
    streams.push_back(r.meta[i].stream);
  }
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  for (int32_t st : streams) {
    const std::vector<int32_t>& sees = r.sees.at(st);
    key.push_back(st);
    key.push_back(static_cast<int32_t>(sees.size()));
    key.insert(key.end(), sees.begin(), sees.end());
  }
  return key;
}

Scheduler::SessionEntries Scheduler::Keep(uint64_t id) {
  Request& r = Get(id);
  const int bs = options_.block_size;
  for (int b = static_cast<int>(r.block_hashes.size()); b * bs < r.num_computed;
       ++b) {
    const uint64_t parent =
        b == 0 ? BlockManager::kRootHash : r.block_hashes[b - 1];
    const int n = std::min(bs, r.num_computed - b * bs);
    r.block_hashes.push_back(blocks_.Commit(r.block_table[b], parent,
                                            SessionBlockKey(r, b * bs, n)));
  }
  SessionEntries kept{std::move(r.tokens), std::move(r.meta),
                      std::move(r.one_token)};
  Remove(id);
  return kept;
}

bool Scheduler::AttachKeptSession(Request& r) {
  const int bs = options_.block_size;
  // Entries with pending sample points must be computed: their logits.
  int limit = static_cast<int>(r.tokens.size());
  for (const SamplePoint& p : r.sample_points) limit = std::min(limit, p.index);
  const int prefix_blocks = std::min(r.num_prompt_tokens, limit) / bs;
  std::vector<int32_t> table;
  std::vector<uint64_t> hashes;
  int done = bs * blocks_.AcquireCachedPrefix(r.tokens, prefix_blocks, &table,
                                              &hashes);
  const int prefix_done = done;
  if (done == prefix_blocks * bs) {
    auto parent = [&] {
      return hashes.empty() ? BlockManager::kRootHash : hashes.back();
    };
    while (done + bs <= limit) {
      uint64_t h = 0;
      const int32_t b =
          blocks_.AcquireCached(parent(), SessionBlockKey(r, done, bs), &h);
      if (b < 0) break;
      table.push_back(b);
      hashes.push_back(h);
      done += bs;
    }
    for (int n = std::min(bs - 1, limit - done); n > 0; --n) {
      const int32_t b =
          blocks_.TakeCached(parent(), SessionBlockKey(r, done, n));
      if (b < 0) continue;
      table.push_back(b);
      done += n;
      break;
    }
  }
  if (done == prefix_done) {
    blocks_.Release(table);
    return false;
  }
  r.block_table = std::move(table);
  r.block_hashes = std::move(hashes);
  r.num_computed = done;
  return true;
}

void Scheduler::CommitFullBlocks(Request& r) {
  const int bs = options_.block_size;
  int full = r.num_computed / bs;
  full = std::min(full, r.num_prompt_tokens / bs);
  for (int b = static_cast<int>(r.block_hashes.size()); b < full; ++b) {
    const uint64_t parent =
        b == 0 ? BlockManager::kRootHash : r.block_hashes[b - 1];
    r.block_hashes.push_back(
        blocks_.Commit(r.block_table[b], parent,
                       absl::MakeConstSpan(r.tokens).subspan(b * bs, bs)));
  }
}

}  // namespace braid::batching
