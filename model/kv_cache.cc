#include "model/kv_cache.h"

#include <algorithm>

namespace braid::model {

KvCache::KvCache(int n_layer, int max_tokens, int kv_dim)
    : n_layer_(n_layer),
      capacity_(std::max(max_tokens, 0)),
      kv_dim_(kv_dim),
      k_(static_cast<size_t>(n_layer) * capacity_ * kv_dim),
      v_(static_cast<size_t>(n_layer) * capacity_ * kv_dim) {}

void KvCache::Truncate(int n) { size_ = std::clamp(n, 0, size_); }

}  // namespace braid::model
