// Causal multi-head attention of one sequence over an fp16 KV cache (GQA
// aware), computed the way llama.cpp's CPU backend computes it without flash
// attention.
//
// Design. llama.cpp builds attention from separate ops: kq = K·q with q
// rounded to fp16, softmax(kq * scale + mask) with ggml's exp and a double
// sum, the weights rounded to fp16, then V^T·weights. Each matmul runs in
// ggml_vec_dot_f16 for a one-token batch and in llamafile's tinyBLAS for
// larger batches, and the two sum in different orders. Small models amplify
// those last-bit differences over many layers (SmolLM2-135M: logits cosine
// 0.98 against llama.cpp with an online softmax), so this kernel mirrors each
// op's summation order (dot.h, vec_math.h): the score row is materialised
// (ggml's padding to 16 lanes is implicit, masked entries weigh exactly 0),
// and the weighted V sum keeps one partial row per accumulator lane of the
// matching ggml kernel before reducing them in its order.
//
// The order is fixed per query by the entries it sees, in rank order (the
// j-th visible entry takes score lane j and accumulator slot j % slots), not
// by where they sit in the context, so a branch sharing a context with others
// computes exactly what an independent sequence would. A task is (a run of
// query tokens of one sequence that see prefixes of one entry list, a KV
// head, that head's query heads): up to 24 query rows share each K and V row,
// converted from fp16 once (attention_avx512.cc on AVX-512; portable kernels
// otherwise, same bits). Tasks are sized to about half a thread's share of
// the call and handed out largest first. Thread-safety: stateless apart from
// per-thread scratch; callers own all buffers.
#ifndef BRAID_KERNELS_CPU_ATTENTION_ATTENTION_H_
#define BRAID_KERNELS_CPU_ATTENTION_ATTENTION_H_

#include <cstdint>

#include "absl/functional/function_ref.h"
#include "kernels/cpu/thread_pool.h"

namespace braid::kernels::cpu {

struct AttentionShape {
  int64_t n_head = 0;
  int64_t n_kv_head = 0;  // n_head % n_kv_head == 0.
  int64_t head_dim = 0;
  // How a score is formed from the dot d = q.k (ggml's order): with
  // softcap > 0, d = softcap * tanh(d / softcap) (Gemma 2's attention
  // logit soft-capping); then d * scale (0: 1 / sqrt(head_dim)).
  float scale = 0.0f;
  float softcap = 0.0f;
  // Sliding-window attention (PagedAttention only): > 0, a query at
  // position y sees only entries at y' > y - window (llama.cpp's standard
  // window: masked when y - y' >= window).
  int32_t window = 0;
};

// q:   [n_tok, n_head, head_dim] f32; query t sits at position q_positions[t]
//      and attends to cache entries 0..q_positions[t] inclusive (causal mask).
// k,v: [n_ctx, n_kv_head, head_dim] fp16; entries up to max(q_positions) valid.
// out: [n_tok, n_head, head_dim] f32.
// Head h reads kv head h / (n_head / n_kv_head); scores are scaled by
// 1/sqrt(head_dim). n_tok selects llama.cpp's kernel choice: results for a
// query depend on whether it was evaluated alone (n_tok == 1) or in a batch,
// exactly as in llama.cpp. head_dim <= 256. pool may be null.
void Attention(const AttentionShape& shape, const float* q,
               const int32_t* q_positions, int64_t n_tok, const uint16_t* k,
               const uint16_t* v, float* out, ThreadPool* pool);

// Where a KV entry (or a query token) sits in the multi-stream layout of
// docs/MULTISTREAM.md: its stream and its position y (RoPE position).
struct KvEntryMeta {
  int32_t stream = 0;
  int32_t y = 0;
};

// One layer of a paged KV cache. Entry `slot` of block `b` holds its K row at
// k + (b * block_size + slot) * n_kv_head * head_dim (fp16; V alike) and its
// metadata at meta[b * block_size + slot]. meta == nullptr means entry i of a
// context is (stream 0, y = i): a plain causal cache.
struct PagedKvLayer {
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  const KvEntryMeta* meta = nullptr;
  int64_t block_size = 0;
  // Nonzero: every call with this value has the same sequences, query
  // tags and entry tags (the layers of one forward pass), so each thread
  // keeps the entries a run of query tokens sees from the first such call
  // for the rest. A new value for every pass.
  uint64_t view_pass = 0;
};

// One sequence of a paged attention call: its query rows
// [first_token, first_token + num_tokens) and a context of num_ctx entries
// (entry i in block_table[i / block_size], slot i % block_size).
struct PagedAttentionSeq {
  int64_t first_token = 0;
  int64_t num_tokens = 0;
  int64_t num_ctx = 0;
  const int32_t* block_table = nullptr;
  // sees(s) besides the query's own stream.
  const int32_t* visible_streams = nullptr;
  int64_t num_visible_streams = 0;
  // The batch size that selects the kernels (below); 0 = num_tokens.
  int64_t kernel_tokens = 0;
};

// Whether query q of `seq` sees entry e under the rule below (its own
// stream up to its position, seq's visible streams strictly before it;
// with a sliding window, only the entries less than `window` positions
// back).
// Whether a sliding window of `window` positions (> 0) hides e from q.
inline bool OutsideWindow(KvEntryMeta q, KvEntryMeta e, int32_t window) {
  return window > 0 && int64_t{q.y} - e.y >= window;
}
inline bool EntryVisible(const PagedAttentionSeq& seq, KvEntryMeta q,
                         KvEntryMeta e, int32_t window = 0) {
  if (OutsideWindow(q, e, window)) return false;
  if (e.stream == q.stream) return e.y <= q.y;
  if (e.y >= q.y) return false;
  for (int64_t s = 0; s < seq.num_visible_streams; ++s) {
    if (seq.visible_streams[s] == e.stream) return true;
  }
  return false;
}

// Attention of many sequences in one call over a paged cache.
// q:   [n_tok, n_head, head_dim] f32; q_meta: [n_tok] (stream, y) per query.
// token_seq: [n_tok] index into seqs of each query row.
// out: [n_tok, n_head, head_dim] f32.
// Query (s, y) attends to context entry (s', y') iff s' in sees(s) and
// (y' < y or (s' == s and y' <= y)), and y - y' < shape.window when the
// shape has a window; every query must see at least itself.
// Arithmetic as Attention() above with the score row over the context in
// the order of the entries it sees (their rank, not their place in the
// context: a branch's queries get the bits of an independent sequence), and
// the kernel choice made from the query's own sequence (kernel_tokens, or
// num_tokens, == 1 or not), never from the rest of the batch: a sequence's
// result is bit-identical alone or in any batch, and with one stream and
// context = positions 0.. it equals Attention().
// done(t0, t1, c0, c1), when given, runs once for each part of out that is
// final, rows [t0, t1) and columns [c0, c1) (whole heads), on the thread
// that wrote it (e.g. to quantize it for the next product): the parts
// cover out exactly once.
void PagedAttention(
    const AttentionShape& shape, const PagedKvLayer& kv, const float* q,
    const KvEntryMeta* q_meta, const PagedAttentionSeq* seqs,
    const int32_t* token_seq, int64_t n_tok, float* out, ThreadPool* pool,
    absl::FunctionRef<void(int64_t, int64_t, int64_t, int64_t)> done =
        [](int64_t, int64_t, int64_t, int64_t) {});

// Sizes the calling thread's scratch (the rows and scores of Attention's and
// PagedAttention's tasks) for contexts of up to max_ctx entries, so the
// calls after it allocate nothing on this thread. A pool's threads each
// take tasks of every kind only by chance: a caller that promises no
// allocation in its step loop runs this on every thread
// (ThreadPool::RunOnEachThread) before the contexts grow past what was
// reserved.
void ReserveAttentionScratch(int64_t max_ctx);

}  // namespace braid::kernels::cpu

#endif  // BRAID_KERNELS_CPU_ATTENTION_ATTENTION_H_
