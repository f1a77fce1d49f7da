// Hand-built batches for benchmarks straight over the model seam
// (model/model.h; model/cuda:cuda_bench): many sequences of arbitrary
// tokens, each owning a contiguous run of KV blocks, prefilled in packed
// chunks and then decoded one token each per step, all at one position.
// Plain values and functions; thread-compatible.
#ifndef BRAID_MODEL_TESTING_BENCH_BATCHES_H_
#define BRAID_MODEL_TESTING_BENCH_BATCHES_H_

#include <cstdint>
#include <vector>

#include "model/batch.h"

namespace braid::model::testing {

// Sequence s owns blocks [s * blocks_per_seq, (s + 1) * blocks_per_seq) of
// block_size entries; its token at position p is BenchToken(s, p).
struct BenchLayout {
  int block_size = 16;
  int blocks_per_seq = 0;
  int n_vocab = 0;

  // The layout for sequences of up to max_entries entries.
  static BenchLayout For(int block_size, int max_entries, int n_vocab);
  // Blocks the layout needs for `seqs` sequences.
  int64_t NumBlocks(int seqs) const;
  // The blocks holding sequence `seq`'s first `entries` entries.
  std::vector<int32_t> Table(int seq, int entries) const;
  // An arbitrary token id in [0, n_vocab), fixed per (seq, pos).
  int32_t Token(int seq, int pos) const;
};

// The steps that prefill sequences [0, seqs) with `len` tokens each, in
// order, chunks packed into steps of at most max_tokens tokens (a long
// prompt spans steps). A sequence's last chunk asks for its last logits row,
// the others for none, as the engine's prefill does.
std::vector<Batch> PrefillBatches(const BenchLayout& layout, int seqs, int len,
                                  int max_tokens);

// A decode step of sequences [0, seqs), one token each; SetDecodePosition
// places it.
Batch DecodeBatch(int seqs);
// Moves every sequence of a DecodeBatch to write position `pos` (its
// context holds pos entries; the step writes entry pos and asks for its
// logits row).
void SetDecodePosition(const BenchLayout& layout, int pos, Batch& b);

}  // namespace braid::model::testing

#endif  // BRAID_MODEL_TESTING_BENCH_BATCHES_H_
