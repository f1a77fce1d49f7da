// The model seam: what the layers above the executor (batching/, server/)
// know of a model, whatever runs it.
//
// A Model describes itself (ModelInfo, a plain value), makes the KV cache it
// computes into (KvCache: blocks of entries, which batching::BlockManager
// hands out by id), and runs one engine step over a Batch (model/batch.h).
// Implementations: model::LlamaModel (model/cpu/, the CPU kernels over a
// paged fp16 pool), batching/testing's scripted test model; the CUDA one
// goes beside them. Nothing above this header names an implementation but
// the composition root (server/main.cc) that loads one.
#ifndef BRAID_MODEL_MODEL_H_
#define BRAID_MODEL_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/batch.h"
#include "model/top_logits.h"

namespace braid::model {

// How a multi-stream model lays its streams out (docs/MULTISTREAM.md "Model
// metadata").
enum class StreamLayout { kAligned, kRows };

// What a loaded model is, for the API (GetModelInfo), the request limits
// and the session-stream binding.
struct ModelInfo {
  std::string name;          // general.name, or empty
  std::string architecture;  // general.architecture, e.g. "llama"
  int n_vocab = 0;           // logits row size
  int n_ctx_train = 0;
  int n_layer = 0;
  int n_embd = 0;
  int n_head = 0;
  int n_head_kv = 0;
  // The file's tensor types, distinct and sorted ("F32", "Q4_K", ...).
  std::vector<std::string> tensor_types;
  std::string backend;  // where Forward runs: "cpu"
  // Multi-stream metadata: one stream, no roles, aligned, no silence token
  // for an ordinary model.
  int n_streams = 1;
  std::vector<std::string> stream_roles;  // [n_streams] or empty
  StreamLayout stream_layout = StreamLayout::kAligned;
  int silence_token_id = -1;
};

// A model's KV cache: num_blocks blocks of block_size entries. Made by the
// model it belongs to (Model::NewKvCache) and only ever passed back to it.
class KvCache {
 public:
  virtual ~KvCache() = default;
  virtual int block_size() const = 0;
  virtual int num_blocks() const = 0;
  virtual int64_t bytes() const = 0;  // memory the cache holds
};

class Model {
 public:
  virtual ~Model() = default;

  virtual const ModelInfo& info() const = 0;

  // Bytes one block of block_size entries takes (sizes a cache to a budget).
  virtual int64_t KvBlockBytes(int block_size) const = 0;
  // A cache of num_blocks blocks of block_size entries (both > 0).
  virtual std::unique_ptr<KvCache> NewKvCache(int block_size,
                                              int num_blocks) const = 0;

  // One engine step: for every sequence of `batch`, its tokens' K/V into
  // its slots of `kv` (context index num_cached + i), attention under the
  // visibility rule of docs/MULTISTREAM.md, and its logits rows
  // ([rows, n_vocab], batch order: none, the last or all of a sequence's
  // tokens, BatchSequence::logits). A sequence's logits depend only on its
  // own tokens and context, never on the rest of the batch. Errors:
  // InvalidArgument for a batch that does not fit the model or `kv` (a
  // cache another model made included); then neither kv nor logits change.
  virtual absl::Status Forward(const Batch& batch, KvCache& kv,
                               std::vector<float>* logits) = 0;

  // Forward whose logits rows leave the model reduced (top_logits.h): each
  // row (penalized first when req.penalties says) reduced to its req.k
  // largest entries and, when asked, its log-sum-exp and its draw; what the
  // executor's samplers need when none of them needs a whole row. The
  // default runs Forward and reduces on the host; a model on a device
  // reduces there and copies back only the reduction. Errors: Forward's,
  // and InvalidArgument for a request CheckTopRequest refuses.
  virtual absl::Status ForwardTop(const Batch& batch, KvCache& kv,
                                  const TopRequest& req, TopLogits* out);
  // Whether ForwardTop reduces where the rows are computed, so that a
  // reduction spares copying them (a device). Not the default's: there a
  // nucleus is cheaper drawn from the whole row than from a reduction,
  // which would sort the row for its denominator.
  virtual bool ReducesOnDevice() const { return false; }

  // Lookahead for greedy decoding (model/lookahead.h), or null for none:
  // the step the caller expects after the next ForwardTop if each of its
  // sequences takes its row's top-1 token (a token < 0 stands for the top-1
  // id of row AheadRow(token)); one-token sequences whose K/V entries lie
  // past their context, in blocks no other sequence holds, so that writing
  // them and never using them changes nothing. A model on a device may
  // start it inside that ForwardTop, so the device does not wait for the
  // host between the two steps; the following ForwardTop then only
  // collects its rows when its batch matches it (MatchAhead) with the same
  // request, and discards it otherwise. Applies to the next ForwardTop
  // only. Default: ignored.
  virtual void SetLookahead(const Batch* ahead) {}
};

}  // namespace braid::model

#endif  // BRAID_MODEL_MODEL_H_
