// One step of LlamaModel::Forward over a validated batch: row-parallel
// (every section of the pass split over the pool) or data-parallel (the
// batch's sequences in parts, one a pool thread, each running the whole
// pass of its part alone): SplitBatch decides, RunPart runs a part.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/cpu/attention/attention.h"
#include "kernels/cpu/gemm/matmul.h"
#include "kernels/cpu/ops.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cpu/thread_pool.h"
#include "model/cpu/llama.h"

namespace braid::model {

namespace k = ::braid::kernels::cpu;

namespace {

// Logits rows a sequence asks for (BatchSequence::logits): its last this
// many tokens'.
int LogitsRows(const BatchSequence& seq) {
  switch (seq.logits) {
    case BatchSequence::Logits::kAll:
      return seq.num_tokens;
    case BatchSequence::Logits::kLast:
      return 1;
    default:
      return 0;
  }
}

// The pool slot of context entry e of `seq`.
int64_t EntrySlot(const BatchSequence& seq, int64_t e, int64_t block_size) {
  return seq.block_table[e / block_size] * block_size + e % block_size;
}

// Data-parallel steps (LlamaModel::data_parallel_steps): at least this many
// tokens a thread, so each thread's products still take 8-token tiles
// (a 16-token part takes each weight row once, 32 row-parallel tokens
// twice; figures in docs/perf-log/code-notes.md).
constexpr int kDataParallelTokens = 8;
// From this many tokens a thread to kDataParallelTokens, the step runs the
// way that has been faster (SplitChooser): which one wins there depends on
// the threads' placement.
constexpr int kMeasuredTokens = 2;
// Decode-sized sequences only (decode steps, a session's lockstep streams):
// their costs are alike, so contiguous parts balance.
constexpr int kDataParallelSeqTokens = 4;
// A token's products cost about what its attention over this many context
// entries does (SmolLM2-135M, 8-token tiles): a sequence's cost in the
// split is its tokens x (this + its context).
constexpr int64_t kTokenCostEntries = 640;

}  // namespace

// Sequences that meet in the step go to the same part: one sees an entry
// that another writes now (both hold its block, and the visibility rule
// lets the reader's queries see the writer's tags). Sharing a block is not
// enough to meet: a session's branches write into one context's blocks but
// never see each other, and attention loads only the K/V rows a query sees
// (the tags, written before the parts run, it reads for every entry).
// reach_[i]: the last sequence that sequence i (or one before it) meets; a
// part may end before sequence i only if none reaches i.
void LlamaModel::MarkMeetings(const Batch& b, const KvView& kv) {
  const int n_seq = static_cast<int>(b.sequences.size());
  if (static_cast<int64_t>(block_writer_.size()) != kv.num_blocks) {
    block_writer_.assign(kv.num_blocks, -1);
  }
  const int64_t bs = kv.block_size;
  // The blocks sequence `seq` writes in the step, to fn.
  auto written = [&](const BatchSequence& seq, auto&& fn) {
    const int64_t last = int64_t{seq.num_cached} + seq.num_tokens - 1;
    for (int64_t blk = seq.num_cached / bs; blk <= last / bs; ++blk) {
      fn(seq.block_table[blk]);
    }
  };
  // Per block, its writers: block_writer_[blk] heads a list in writes_.
  writes_.clear();
  for (int i = 0; i < n_seq; ++i) {
    written(b.sequences[i], [&](int32_t blk) {
      writes_.push_back({i, block_writer_[blk]});
      block_writer_[blk] = static_cast<int32_t>(writes_.size()) - 1;
    });
  }
  // Whether a query of sequence r sees an entry sequence w writes now.
  auto sees = [&](int r, int w) {
    const BatchSequence& rs = b.sequences[r];
    const BatchSequence& ws = b.sequences[w];
    k::PagedAttentionSeq view;
    view.visible_streams = rs.visible_streams.data();
    view.num_visible_streams = static_cast<int64_t>(rs.visible_streams.size());
    for (int t = rs.first_token; t < rs.first_token + rs.num_tokens; ++t) {
      for (int u = ws.first_token; u < ws.first_token + ws.num_tokens; ++u) {
        if (k::EntryVisible(view, metas_[t], metas_[u])) return true;
      }
    }
    return false;
  };
  reach_.resize(n_seq);
  for (int i = 0; i < n_seq; ++i) reach_[i] = i;
  for (int i = 0; i < n_seq; ++i) {
    const BatchSequence& seq = b.sequences[i];
    const int64_t blocks =
        (int64_t{seq.num_cached} + seq.num_tokens + bs - 1) / bs;
    for (int64_t j = 0; j < blocks; ++j) {
      for (int32_t w = block_writer_[seq.block_table[j]]; w >= 0;
           w = writes_[w].next) {
        const int other = writes_[w].seq;
        if (other == i || !sees(i, other)) continue;
        const int lo = std::min(other, i);
        reach_[lo] = std::max(reach_[lo], std::max(other, i));
      }
    }
  }
  for (const BatchSequence& seq : b.sequences) {
    written(seq, [&](int32_t blk) { block_writer_[blk] = -1; });
  }
}

bool LlamaModel::SplitBatch(const Batch& b, const KvView& kv, bool* measured) {
  const int p = pool_.num_threads();
  const int n = static_cast<int>(b.tokens.size());
  const int n_seq = static_cast<int>(b.sequences.size());
  // Fewer tokens a thread than kDataParallelTokens: a split is possible,
  // but whether it is faster is measured (SplitChooser).
  const bool measure = n < kDataParallelTokens * p;
  *measured = false;
  if (p < 2 || n < kMeasuredTokens * p || n_seq < p) return false;
  for (const BatchSequence& seq : b.sequences) {
    if (seq.num_tokens > kDataParallelSeqTokens) return false;
  }
  MarkMeetings(b, kv);
  // Contiguous runs of sequences of about equal cost, one a thread.
  auto cost = [](const BatchSequence& seq) {
    return int64_t{seq.num_tokens} *
           (kTokenCostEntries + seq.num_cached + seq.num_tokens);
  };
  int64_t total = 0;
  for (const BatchSequence& seq : b.sequences) total += cost(seq);
  parts_.clear();
  int64_t acc = 0, part_cost = 0, max_cost = 0;
  int row = 0, reach = -1;
  Part part;
  for (int i = 0; i < n_seq; ++i) {
    const BatchSequence& seq = b.sequences[i];
    const int64_t c = cost(seq);
    const int64_t target = total * static_cast<int64_t>(parts_.size() + 1) / p;
    // Close the part before sequence i when no meeting crosses there and
    // that lands nearer its share's end than taking i does, leaving a
    // sequence for each later part.
    const bool close = i > part.s0 && reach < i &&
                       static_cast<int>(parts_.size()) < p - 1 &&
                       (acc + c - target > target - acc ||
                        n_seq - i <= p - 1 - static_cast<int>(parts_.size()));
    reach = std::max(reach, reach_[i]);
    if (close) {
      part.s1 = i;
      part.t1 = seq.first_token;
      parts_.push_back(part);
      max_cost = std::max(max_cost, part_cost);
      part = Part{i, 0, seq.first_token, 0, row};
      part_cost = 0;
    }
    acc += c;
    part_cost += c;
    row += LogitsRows(seq);
  }
  part.s1 = n_seq;
  part.t1 = n;
  parts_.push_back(part);
  max_cost = std::max(max_cost, part_cost);
  // Uneven costs (a long context beside short ones) stay row-parallel.
  if (static_cast<int>(parts_.size()) != p || max_cost * p > total * 5 / 4) {
    return false;
  }
  // Neither may a part's tiles cost more than its thread's share of the
  // row-parallel step's: a product over t tokens takes t / 8 passes of
  // 8-token tiles, and a rest of 1-4 tokens a 4-token tile costing ~0.65 of
  // one (5-7 tokens: a whole one). 16 sequences split 8 + 8 (the same
  // tiles, no hand-overs); 24 as 12 + 12 would take an extra 4-token tile a
  // thread (1.4% slower, step-interleaved).
  auto tiles = [](int t) {
    return (t / 8) * 100 + (t % 8 == 0 ? 0 : t % 8 <= 4 ? 65 : 100);
  };
  for (const Part& q : parts_) {
    if (!measure && tiles(q.t1 - q.t0) * p > tiles(n)) return false;
  }
  if (static_cast<int>(part_execs_.size()) != p) {
    part_execs_ = std::vector<PartExec>(p);
    for (PartExec& e : part_execs_) {
      e.serial = std::make_unique<k::ThreadPool>(1);
    }
  }
  *measured = measure;
  return true;
}

void LlamaModel::ForwardBatch(const Batch& b, const KvView& kv,
                              std::vector<float>* logits) {
  const LlamaConfig& c = config_;
  int n_out = 0;
  for (const BatchSequence& seq : b.sequences) n_out += LogitsRows(seq);
  logits->resize(static_cast<size_t>(n_out) * c.n_vocab);
  const int n = static_cast<int>(b.tokens.size());
  metas_.resize(n);
  for (int t = 0; t < n; ++t) metas_[t] = {b.meta[t].stream, b.meta[t].y};
  // Every new entry's tags before any part runs: a part's attention reads
  // the tags of every entry in its contexts, those other parts write too.
  for (const BatchSequence& seq : b.sequences) {
    for (int j = 0; j < seq.num_tokens; ++j) {
      const int64_t e = int64_t{seq.num_cached} + j;
      kv.meta[EntrySlot(seq, e, kv.block_size)] = metas_[seq.first_token + j];
    }
  }
  bool measured = false;
  bool data = SplitBatch(b, kv, &measured);
  if (data && measured) data = split_chooser_.PickData(n);
  const auto start = measured ? std::chrono::steady_clock::now()
                              : std::chrono::steady_clock::time_point{};
  if (!data) {
    const Part all{0, static_cast<int>(b.sequences.size()), 0, n, 0};
    RunPart(b, all, kv, Exec{&pool_, &scratch_, profile_}, logits->data());
    if (profile_ != nullptr) ++profile_->steps;
  } else {
    RunParts(b, kv, logits->data());
  }
  if (measured) {
    split_chooser_.Record(
        n, data,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count());
  }
}

void LlamaModel::RunParts(const Batch& b, const KvView& kv, float* logits) {
  const LlamaConfig& c = config_;
  ++data_parallel_steps_;
  const int p = static_cast<int>(parts_.size());
  // Part i on thread i every step: its thread_local kernel scratch is
  // sized once.
  pool_.RunOnThreads([&](int64_t i) {
    PartExec& e = part_execs_[i];
    e.profile = SectionProfile{};
    RunPart(b, parts_[i], kv,
            Exec{e.serial.get(), &e.scratch,
                 profile_ != nullptr ? &e.profile : nullptr},
            nullptr);
  });
  // The vocabulary projection of every part's rows at once, row-parallel:
  // each thread reads half the output matrix for all the tokens instead of
  // all of it for its own (the same bits: a tile's output does not depend
  // on its batch).
  int n_out = 0;
  for (const PartExec& e : part_execs_) n_out += e.scratch.n_out;
  EnsureScratch(scratch_, n_out);
  int row = 0;
  for (const PartExec& e : part_execs_) {
    for (int r = 0; r < e.scratch.n_out; ++r, ++row) {
      std::copy_n(e.scratch.x.data() +
                      static_cast<size_t>(e.scratch.out_rows[r]) * c.n_embd,
                  c.n_embd,
                  scratch_.x.data() + static_cast<size_t>(row) * c.n_embd);
    }
  }
  if (profile_ != nullptr) {  // The parts ran side by side: their mean.
    for (int sec = 0; sec < kNumSections; ++sec) {
      for (const PartExec& e : part_execs_) {
        profile_->seconds[sec] += e.profile.seconds[sec] / p;
      }
    }
    ++profile_->steps;
  }
  ProjectVocab(scratch_.x.data(), nullptr, n_out,
               Exec{&pool_, &scratch_, profile_}, logits);
}

void LlamaModel::RunPart(const Batch& b, const Part& part, const KvView& kv,
                         const Exec& exec, float* logits) {
  const LlamaConfig& c = config_;
  const int n = part.t1 - part.t0;
  Scratch& s = *exec.scratch;
  EnsureScratch(s, n);
  int64_t max_ctx = 0;
  const int n_out = IndexPart(b, part, kv, s, &max_ctx);
  EmbedPart(b, part, s);
  ReserveForPart(exec, max_ctx);
  // Every layer's attention sees the same entries: the views are built
  // once a pass.
  static std::atomic<uint64_t> passes{0};
  s.view_pass = ++passes;
  k::RopeTable(s.pos.data(), n, c.n_rot, c.rope_base, s.rope_cs.data(),
               rope_freqs_.empty() ? nullptr : rope_freqs_.data(),
               c.rope_freq_scale);
  if (c.SwaRopeDiffers()) {
    k::RopeTable(s.pos.data(), n, c.n_rot, c.swa_rope_base,
                 s.rope_cs_swa.data(),
                 rope_freqs_.empty() ? nullptr : rope_freqs_.data(),
                 c.swa_rope_freq_scale);
  }
  const KvEntryMeta* meta = metas_.data() + part.t0;
  for (int il = 0; il < c.n_layer; ++il) RunLayer(il, meta, n, kv, exec);

  s.n_out = n_out;
  if (logits != nullptr) {
    ProjectVocab(s.x.data(), s.out_rows.data(), n_out, exec, logits);
  }
}

int LlamaModel::IndexPart(const Batch& b, const Part& part, const KvView& kv,
                          Scratch& s, int64_t* max_ctx) const {
  int n_out = 0;
  for (int i = part.s0; i < part.s1; ++i) {
    const BatchSequence& seq = b.sequences[i];
    *max_ctx = std::max(*max_ctx, int64_t{seq.num_cached} + seq.num_tokens);
    s.seqs[i - part.s0] =
        k::PagedAttentionSeq{seq.first_token - part.t0,
                             seq.num_tokens,
                             int64_t{seq.num_cached} + seq.num_tokens,
                             seq.block_table.data(),
                             seq.visible_streams.data(),
                             static_cast<int64_t>(seq.visible_streams.size()),
                             seq.kernel_tokens};
    for (int j = 0; j < seq.num_tokens; ++j) {
      const int t = seq.first_token + j;  // in the batch
      const int lt = t - part.t0;         // in the part
      s.tok_seq[lt] = i - part.s0;
      const int64_t e = seq.num_cached + j;
      s.slot[lt] = EntrySlot(seq, e, kv.block_size);
      if (j >= seq.num_tokens - LogitsRows(seq)) s.out_rows[n_out++] = lt;
    }
  }
  return n_out;
}

void LlamaModel::EmbedPart(const Batch& b, const Part& part, Scratch& s) const {
  const LlamaConfig& c = config_;
  const KvEntryMeta* meta = metas_.data() + part.t0;
  for (int t = 0; t < part.t1 - part.t0; ++t) {
    s.pos[t] = meta[t].y;
    float* x = s.x.data() + static_cast<size_t>(t) * c.n_embd;
    k::DequantizeRow(token_embd_.type, token_embd_.Row(b.tokens[part.t0 + t]),
                     x, c.n_embd);
    if (c.traits.gemma) {  // ggml_scale by sqrtf(n_embd)
      const float scale = std::sqrt(static_cast<float>(c.n_embd));
      for (int i = 0; i < c.n_embd; ++i) x[i] *= scale;
    }
    if (!stream_embd_.empty()) {
      k::AddInPlace(
          x,
          stream_embd_.data() + static_cast<size_t>(meta[t].stream) * c.n_embd,
          c.n_embd);
    }
  }
}

// The attention scratch of every thread that may run a task, sized for the
// longest context (to the next power of two) before the layers: the step
// loop allocates nothing. A pool's threads take tasks by chance, so all of
// them, at once; a one-thread execution (a data-parallel part, on whichever
// pool thread took it) this thread, every time (free when already large
// enough).
void LlamaModel::ReserveForPart(const Exec& exec, int64_t max_ctx) {
  Scratch& s = *exec.scratch;
  int64_t ctx = 256;
  while (ctx < max_ctx) ctx *= 2;
  if (exec.pool->num_threads() == 1) {
    k::ReserveAttentionScratch(ctx);
    return;
  }
  if (ctx > s.attention_ctx) {
    s.attention_ctx = ctx;
    exec.pool->RunOnEachThread([ctx] { k::ReserveAttentionScratch(ctx); });
  }
  if (!s.local_inputs_reserved) {
    s.local_inputs_reserved = true;
    exec.pool->RunOnEachThread([this] { ReserveLocalInputs(); });
  }
}

void LlamaModel::ProjectVocab(const float* x, const int32_t* rows, int n_out,
                              const Exec& exec, float* logits) {
  if (n_out == 0) return;
  const LlamaConfig& c = config_;
  Scratch& s = *exec.scratch;
  // The final norm runs in the projection's quantization tasks.
  auto norm = [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t from = rows != nullptr ? rows[r] : r;
      k::RmsNorm(x + static_cast<size_t>(from) * c.n_embd, output_norm_.data(),
                 1, c.n_embd, c.rms_eps,
                 s.h.data() + static_cast<size_t>(r) * c.n_embd);
    }
  };
  const auto t0 = exec.profile != nullptr
                      ? std::chrono::steady_clock::now()
                      : std::chrono::steady_clock::time_point{};
  k::MatMul(output_, s.h.data(), n_out, logits, false, exec.pool, &s.matmul,
            norm);
  if (c.final_softcap > 0) {
    exec.pool->ParallelFor(n_out, [&](int64_t r) {
      k::SoftcapInPlace(logits + r * c.n_vocab, c.n_vocab, c.final_softcap);
    });
  }
  if (exec.profile != nullptr) {
    exec.profile->seconds[kVocab] +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0)
            .count();
  }
}

}  // namespace braid::model
