// One engine step's work for Model::Forward (model/model.h): any number of
// sequences, each contributing a prefill chunk or decode tokens, flattened
// into one token list. Plain value built by the executor from a
// batching::StepPlan.
#ifndef BRAID_MODEL_BATCH_H_
#define BRAID_MODEL_BATCH_H_

#include <cstdint>
#include <vector>

namespace braid::model {

// Where an entry sits in the multi-stream layout of docs/MULTISTREAM.md: its
// stream and y (its RoPE position). For ordinary decoding, stream 0 and y =
// the token's position.
struct EntryMeta {
  int32_t stream = 0;
  int32_t y = 0;
};

// A sequence's part of the batch.
struct BatchSequence {
  // Its tokens are tokens[first_token .. first_token + num_tokens), >= 1 of
  // them. Sequences partition the batch's tokens in order: sequence i starts
  // where sequence i-1 ended (Model::Forward checks it).
  int first_token = 0;
  int num_tokens = 0;
  // Entries already in the cache before this step; this step's entries are
  // written at context indices num_cached .. num_cached + num_tokens - 1.
  int num_cached = 0;
  // Blocks of the whole context (cached and new), in order; must cover
  // num_cached + num_tokens entries. Blocks may be shared with other
  // sequences (prefix reuse) only for entries < num_cached.
  std::vector<int32_t> block_table;
  // Streams this sequence's queries may see (MULTISTREAM.md's sees(s)),
  // besides their own; empty = only entries of their own stream.
  std::vector<int32_t> visible_streams;
  // Logits wanted: for every token of this sequence, or only its last one,
  // or none (a prefill chunk that does not end the prompt).
  enum class Logits { kNone, kLast, kAll } logits = Logits::kLast;
  // The batch size that picks the attention kernels' summation order (see
  // kernels/cpu/attention/attention.h); 0 = num_tokens. A prompt computed in
  // chunks gives each chunk its whole size, so any chunking (down to one token
  // per step) yields the bits of the prompt computed in one call.
  int kernel_tokens = 0;
};

struct Batch {
  std::vector<int32_t> tokens;  // [n_tokens]
  // Entry metadata of each token: its stream and y (RoPE position, >= 0).
  // A sequence's queries see its context under MULTISTREAM.md's rule; with
  // one stream (stream 0, y = context index) that is the causal mask.
  std::vector<EntryMeta> meta;  // [n_tokens]
  std::vector<BatchSequence> sequences;
};

}  // namespace braid::model

#endif  // BRAID_MODEL_BATCH_H_
