#include "batching/testing/toy_model.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "model/lookahead.h"

namespace braid::batching::testing {
namespace {

// Each slot's token and (stream, y); -1 tokens were never written.
class ToyKvCache : public model::KvCache {
 public:
  ToyKvCache(int block_size, int num_blocks)
      : block_size_(block_size),
        num_blocks_(num_blocks),
        tokens_(static_cast<size_t>(block_size) * num_blocks, -1),
        meta_(tokens_.size()) {}

  int block_size() const override { return block_size_; }
  int num_blocks() const override { return num_blocks_; }
  int64_t bytes() const override {
    return static_cast<int64_t>(tokens_.size()) *
           (sizeof(int32_t) + sizeof(model::EntryMeta));
  }

  int64_t Slot(const model::BatchSequence& seq, int64_t entry) const {
    return int64_t{seq.block_table[entry / block_size_]} * block_size_ +
           entry % block_size_;
  }
  std::vector<int32_t>& tokens() { return tokens_; }
  std::vector<model::EntryMeta>& meta() { return meta_; }

 private:
  const int block_size_, num_blocks_;
  std::vector<int32_t> tokens_;
  std::vector<model::EntryMeta> meta_;
};

}  // namespace

ToyModel::ToyModel(int n_vocab) {
  info_.name = "toy";
  info_.architecture = "toy";
  info_.n_vocab = n_vocab;
  info_.n_ctx_train = 1 << 20;
  info_.n_layer = 1;
  info_.backend = "test";
}

int32_t ToyModel::Next(absl::Span<const int32_t> seen, int n_vocab) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : seen) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  // Ids from 200 on: clear of the vocabulary's special tokens.
  return static_cast<int32_t>(200 + h % static_cast<uint64_t>(n_vocab - 200));
}

int64_t ToyModel::KvBlockBytes(int block_size) const {
  return int64_t{block_size} * (sizeof(int32_t) + sizeof(model::EntryMeta));
}

std::unique_ptr<model::KvCache> ToyModel::NewKvCache(int block_size,
                                                     int num_blocks) const {
  return std::make_unique<ToyKvCache>(block_size, num_blocks);
}

void ToyModel::SetLookahead(const model::Batch* ahead) {
  ahead_.reset();
  if (ahead != nullptr) ahead_ = *ahead;
}

absl::Status ToyModel::ForwardTop(const model::Batch& batch, model::KvCache& kv,
                                  const model::TopRequest& req,
                                  model::TopLogits* out) {
  ++top_steps_;
  draw_steps_ += !req.draws.empty();
  std::optional<model::Batch> ahead = std::move(ahead_);
  ahead_.reset();
  std::optional<std::vector<int>> rows;
  if (pending_.has_value() && pending_req_.k == req.k &&
      pending_req_.log_z == req.log_z) {
    rows = model::MatchAhead(*pending_, batch);
  }
  pending_.reset();
  if (rows.has_value()) {
    ++lookahead_hits_;
    model::SelectRows(pending_top_, *rows, out);
  } else if (absl::Status st = Model::ForwardTop(batch, kv, req, out);
             !st.ok()) {
    return st;
  }
  if (ahead.has_value() && model::CheckAhead(*ahead, out->num_rows()).ok()) {
    model::Batch resolved = model::ResolveAhead(*ahead, *out);
    if (Model::ForwardTop(resolved, kv, req, &pending_top_).ok()) {
      pending_ = std::move(resolved);
      pending_req_ = req;
    }
  }
  return absl::OkStatus();
}

absl::Status ToyModel::Forward(const model::Batch& batch, model::KvCache& cache,
                               std::vector<float>* logits) {
  ++steps_;
  auto* kv = dynamic_cast<ToyKvCache*>(&cache);
  if (kv == nullptr) {
    return absl::InvalidArgumentError("Forward: not a ToyModel's KV cache");
  }
  if (batch.meta.size() != batch.tokens.size()) {
    return absl::InvalidArgumentError("Forward: tokens and metas disagree");
  }
  int rows = 0;
  for (const model::BatchSequence& seq : batch.sequences) {
    const int64_t n_ctx = int64_t{seq.num_cached} + seq.num_tokens;
    if (seq.first_token < 0 || seq.num_tokens <= 0 ||
        seq.first_token + seq.num_tokens >
            static_cast<int>(batch.tokens.size()) ||
        static_cast<int64_t>(seq.block_table.size()) * kv->block_size() <
            n_ctx) {
      return absl::InvalidArgumentError("Forward: bad sequence");
    }
    for (int32_t b : seq.block_table) {
      if (b < 0 || b >= kv->num_blocks()) {
        return absl::InvalidArgumentError(
            absl::StrCat("Forward: block ", b, " outside the cache"));
      }
    }
    rows += seq.logits == model::BatchSequence::Logits::kAll    ? seq.num_tokens
            : seq.logits == model::BatchSequence::Logits::kLast ? 1
                                                                : 0;
  }
  // Every new entry first (a sequence may see another's entries of the same
  // step: a session's streams).
  for (const model::BatchSequence& seq : batch.sequences) {
    for (int j = 0; j < seq.num_tokens; ++j) {
      const int64_t slot = kv->Slot(seq, int64_t{seq.num_cached} + j);
      kv->tokens()[slot] = batch.tokens[seq.first_token + j];
      kv->meta()[slot] = batch.meta[seq.first_token + j];
    }
  }
  logits->assign(static_cast<size_t>(rows) * info_.n_vocab, 0.0f);
  int row = 0;
  std::vector<int32_t> seen;
  for (const model::BatchSequence& seq : batch.sequences) {
    for (int j = 0; j < seq.num_tokens; ++j) {
      const bool last = j == seq.num_tokens - 1;
      if (seq.logits == model::BatchSequence::Logits::kNone ||
          (seq.logits == model::BatchSequence::Logits::kLast && !last)) {
        continue;
      }
      const model::EntryMeta q = batch.meta[seq.first_token + j];
      seen.clear();
      for (int64_t e = 0; e <= int64_t{seq.num_cached} + j; ++e) {
        const int64_t slot = kv->Slot(seq, e);
        const model::EntryMeta m = kv->meta()[slot];
        const bool other =
            std::find(seq.visible_streams.begin(), seq.visible_streams.end(),
                      m.stream) != seq.visible_streams.end();
        if ((m.stream == q.stream && m.y <= q.y) || (other && m.y < q.y)) {
          seen.push_back(kv->tokens()[slot]);
        }
      }
      (*logits)[static_cast<size_t>(row++) * info_.n_vocab +
                Next(seen, info_.n_vocab)] = 1.0f;
    }
  }
  return absl::OkStatus();
}

}  // namespace braid::batching::testing
