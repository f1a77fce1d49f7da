// The paged KV cache: one pool of fixed-size blocks shared by every sequence.
//
// Storage per layer: K and V are each [num_blocks, block_size, kv_dim] fp16.
// Beside every slot sits its entry metadata (stream, y) from
// docs/MULTISTREAM.md: the attention kernels evaluate the visibility rule from
// it, and RoPE used `y` when the entry was written. A sequence's context is
// the ordered list of its blocks (its block table); entry i of the sequence
// lives in block_table[i / block_size], slot i % block_size.
//
// The pool is plain storage: which blocks are free, shared or cached is the
// business of batching::BlockManager. Owned by the engine; written only by
// LlamaModel::Forward on the engine thread; not thread-safe.
#ifndef BRAID_MODEL_CPU_PAGED_KV_H_
#define BRAID_MODEL_CPU_PAGED_KV_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/attention/attention.h"
#include "model/model.h"

namespace braid::model {

// An entry's (stream, y) as the pool keeps it: model::EntryMeta in the
// kernels' type, so the attention kernel reads the pool's metadata in place.
using KvEntryMeta = kernels::cpu::KvEntryMeta;

// Unmaps the mapping a pool's K or V array lies in.
struct KvRowsUnmap {
  void* base = nullptr;
  size_t bytes = 0;
  void operator()(uint16_t*) const;
};

class PagedKvPool : public KvCache {
 public:
  using Rows = std::unique_ptr<uint16_t, KvRowsUnmap>;

  // All sizes > 0 (checked; a bad shape is a bug in the caller). The storage
  // is reserved zeroed here, once, and takes memory as blocks are first
  // written; entries are meaningless until written.
  PagedKvPool(int n_layer, int kv_dim, int block_size, int num_blocks);

  // Blocks that fit in `bytes` for this shape (K + V + metadata); 0 when not
  // even one fits.
  static int BlocksForBudget(int n_layer, int kv_dim, int block_size,
                             int64_t bytes);
  // Bytes of one block of this shape (K, V and metadata).
  static int64_t BlockBytes(int n_layer, int kv_dim, int block_size);

  int n_layer() const { return n_layer_; }
  int kv_dim() const { return kv_dim_; }
  int block_size() const override { return block_size_; }
  int num_blocks() const override { return num_blocks_; }
  int64_t bytes() const override;

  // [block_size, kv_dim] fp16 of `block` in `layer`.
  uint16_t* k(int layer, int block) { return k_.get() + Offset(layer, block); }
  uint16_t* v(int layer, int block) { return v_.get() + Offset(layer, block); }
  const uint16_t* k(int layer, int block) const {
    return k_.get() + Offset(layer, block);
  }
  const uint16_t* v(int layer, int block) const {
    return v_.get() + Offset(layer, block);
  }
  // [block_size] metadata of `block` (shared by all layers).
  KvEntryMeta* meta(int block) {
    return meta_.data() + int64_t{block} * block_size_;
  }
  const KvEntryMeta* meta(int block) const {
    return meta_.data() + int64_t{block} * block_size_;
  }

 private:
  int64_t Offset(int layer, int block) const {
    return (int64_t{layer} * num_blocks_ + block) * block_size_ * kv_dim_;
  }

  int n_layer_, kv_dim_, block_size_, num_blocks_;
  // [n_layer][num_blocks][block_size][kv_dim], page-aligned, committed as
  // written (see the .cc).
  Rows k_, v_;
  std::vector<KvEntryMeta> meta_;  // [num_blocks][block_size]
};

}  // namespace braid::model

#endif  // BRAID_MODEL_CPU_PAGED_KV_H_
