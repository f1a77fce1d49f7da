#include "model/testing/bench_batches.h"

#include <algorithm>
#include <utility>

namespace braid::model::testing {

BenchLayout BenchLayout::For(int block_size, int max_entries, int n_vocab) {
  BenchLayout l;
  l.block_size = block_size;
  l.blocks_per_seq = (max_entries + block_size - 1) / block_size;
  l.n_vocab = n_vocab;
  return l;
}

int64_t BenchLayout::NumBlocks(int seqs) const {
  return int64_t{seqs} * blocks_per_seq;
}

std::vector<int32_t> BenchLayout::Table(int seq, int entries) const {
  std::vector<int32_t> t((entries + block_size - 1) / block_size);
  for (size_t i = 0; i < t.size(); ++i) {
    t[i] = seq * blocks_per_seq + static_cast<int32_t>(i);
  }
  return t;
}

int32_t BenchLayout::Token(int seq, int pos) const {
  uint64_t h = static_cast<uint64_t>(seq) * 0x9e3779b97f4a7c15ull ^
               static_cast<uint64_t>(pos) * 0xbf58476d1ce4e5b9ull;
  h ^= h >> 31;
  return static_cast<int32_t>(h % static_cast<uint64_t>(n_vocab));
}

std::vector<Batch> PrefillBatches(const BenchLayout& layout, int seqs, int len,
                                  int max_tokens) {
  std::vector<Batch> steps;
  int seq = 0, done = 0;  // the next chunk: sequence `seq` from `done`
  while (seq < seqs && len > 0) {
    Batch b;
    int n = 0;
    while (seq < seqs && n < max_tokens) {
      const int take = std::min(len - done, max_tokens - n);
      BatchSequence s;
      s.first_token = n;
      s.num_tokens = take;
      s.num_cached = done;
      s.block_table = layout.Table(seq, done + take);
      s.logits = done + take == len ? BatchSequence::Logits::kLast
                                    : BatchSequence::Logits::kNone;
      for (int i = done; i < done + take; ++i) {
        b.tokens.push_back(layout.Token(seq, i));
        b.meta.push_back({0, i});
      }
      b.sequences.push_back(std::move(s));
      n += take;
      done += take;
      if (done == len) {
        ++seq;
        done = 0;
      }
    }
    steps.push_back(std::move(b));
  }
  return steps;
}

Batch DecodeBatch(int seqs) {
  Batch b;
  b.tokens.resize(seqs);
  b.meta.resize(seqs);
  b.sequences.resize(seqs);
  for (int i = 0; i < seqs; ++i) {
    b.sequences[i].first_token = i;
    b.sequences[i].num_tokens = 1;
  }
  return b;
}

void SetDecodePosition(const BenchLayout& layout, int pos, Batch& b) {
  for (size_t i = 0; i < b.sequences.size(); ++i) {
    const int seq = static_cast<int>(i);
    b.tokens[i] = layout.Token(seq, pos);
    b.meta[i] = {0, pos};
    b.sequences[i].num_cached = pos;
    b.sequences[i].block_table = layout.Table(seq, pos + 1);
  }
}

}  // namespace braid::model::testing
