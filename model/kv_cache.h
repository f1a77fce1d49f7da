// Per-sequence key/value cache for a Llama model, stored as fp16.
//
// Layout per layer: K and V are each [capacity, n_kv_head * head_dim] (row t
// holds position t), matching what kernels::cpu::Attention reads. size() is the
// number of positions filled; LlamaModel::Forward appends after it. Truncate(n)
// drops positions
// >= n (for rewinding or prefix reuse). Owned by one sequence; not thread-safe.
#ifndef BRAID_MODEL_KV_CACHE_H_
#define BRAID_MODEL_KV_CACHE_H_

#include <cstddef>
#include <cstdint>
#include <vector>

namespace braid::model {

class KvCache {
 public:
  KvCache(int n_layer, int max_tokens, int kv_dim);

  int size() const { return size_; }
  int capacity() const { return capacity_; }
  int n_layer() const { return n_layer_; }
  int kv_dim() const { return kv_dim_; }

  // Drops positions >= n; no-op when n >= size(). n < 0 is treated as 0.
  void Truncate(int n);

  // [capacity, kv_dim] fp16 for `layer`.
  uint16_t* k(int layer) { return k_.data() + LayerOffset(layer); }
  uint16_t* v(int layer) { return v_.data() + LayerOffset(layer); }
  const uint16_t* k(int layer) const { return k_.data() + LayerOffset(layer); }
  const uint16_t* v(int layer) const { return v_.data() + LayerOffset(layer); }

  // Marks positions [size(), n) filled. Called by the forward pass after it
  // wrote them; n must be <= capacity().
  void set_size(int n) { size_ = n; }

 private:
  size_t LayerOffset(int layer) const {
    return static_cast<size_t>(layer) * capacity_ * kv_dim_;
  }

  int n_layer_;
  int capacity_;
  int kv_dim_;
  int size_ = 0;
  std::vector<uint16_t> k_;  // [n_layer][capacity][kv_dim]
  std::vector<uint16_t> v_;  // [n_layer][capacity][kv_dim]
};

}  // namespace braid::model

#endif  // BRAID_MODEL_KV_CACHE_H_
