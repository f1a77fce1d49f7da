// LlamaModel's loading: the weights bound to the file's tensors (checked,
// repacked where the CPU takes a layout of its own), what loading made of the
// file, and the KV cache it computes into. The forward pass is llama.cc and
// llama_step.cc.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/gemm/matmul.h"
#include "kernels/cpu/quant/quant.h"
#include "model/cpu/llama.h"
#include "util/status_macros.h"

namespace braid::model {
namespace {

namespace k = ::braid::kernels::cpu;

// GgmlType and k::DType both carry ggml's type ids, and every GgmlType the
// reader accepts is a k::DType the kernels read.
k::DType ToDType(GgmlType t) { return static_cast<k::DType>(t); }

// A 2-D weight [rows, cols] (ggml ne = {cols, rows}).
// Both helpers add the tensor's name to *read (LlamaModel::UnusedTensors).
absl::StatusOr<k::WeightMatrix> Matrix(const GgufFile& f,
                                       absl::flat_hash_set<std::string>* read,
                                       const std::string& name, int64_t rows,
                                       int64_t cols) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  }
  if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
    return absl::InvalidArgumentError(absl::StrCat(
        "tensor ", name, " has shape [", absl::StrJoin(t->dims, ","),
        "], want [", cols, ",", rows, "]"));
  }
  read->insert(name);
  return k::WeightMatrix{ToDType(t->type), t->data, rows, cols};
}

// Adds the packed copy of w (kernels/cpu/gemm/packed_gemm.h; packed) or,
// where that is not made, its quad or octet layout (kernels/cpu/gemm/
// gemm_tile.h) when this CPU takes it, then drops the file's pages of the
// original from this process (they were read to repack them; kept, they
// would count twice in its memory). The original stays mapped: a read
// faults its pages back in (the tied embeddings' rows are looked up there).
void Repack(const GgufFile& f, k::WeightMatrix* w, bool packed,
            k::ThreadPool* pool) {
  if (!(packed && k::PackWeightMatrix(w)) && !k::RepackQuadMatrix(w, pool)) {
    return;
  }
  f.ReleasePages(w->data, k::DTypeRowBytes(w->type, w->cols) * w->rows);
}

// A 1-D vector [n] in any float type, copied to f32.
absl::StatusOr<std::vector<float>> Vector(
    const GgufFile& f, absl::flat_hash_set<std::string>* read,
    const std::string& name, int64_t n) {
  const GgufTensor* t = f.FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  }
  if (t->dims.size() != 1 || t->dims[0] != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " must have shape [", n, "]"));
  }
  std::vector<float> out(n);
  k::DequantizeRow(ToDType(t->type), t->data, out.data(), n);
  read->insert(name);
  return out;
}

}  // namespace

LlamaModel::LlamaModel(std::unique_ptr<GgufFile> file, LlamaConfig config,
                       const LoadOptions& opts)
    : file_(std::move(file)),
      config_(std::move(config)),
      pool_(opts.num_threads, opts.spin_us),
      packed_matmul_(opts.packed_matmul) {}

absl::StatusOr<std::unique_ptr<LlamaModel>> LlamaModel::Load(
    std::unique_ptr<GgufFile> file, const LoadOptions& opts) {
  if (file == nullptr) return absl::InvalidArgumentError("null GgufFile");
  absl::StatusOr<LlamaConfig> config = LlamaConfig::FromGguf(*file);
  if (!config.ok()) return config.status();
  std::unique_ptr<LlamaModel> model(
      new LlamaModel(std::move(file), *std::move(config), opts));
  if (absl::Status s = model->BindWeights(); !s.ok()) return s;
  model->DescribeInfo();
  return model;
}

absl::Status LlamaModel::BindWeights() {
  const GgufFile& f = *file_;
  const LlamaConfig& c = config_;
  BRAID_ASSIGN_OR_RETURN(
      token_embd_,
      Matrix(f, &read_tensors_, "token_embd.weight", c.n_vocab, c.n_embd));
  BRAID_ASSIGN_OR_RETURN(
      output_norm_, Vector(f, &read_tensors_, "output_norm.weight", c.n_embd));
  if (f.FindTensor("rope_freqs.weight") != nullptr) {
    BRAID_ASSIGN_OR_RETURN(
        rope_freqs_,
        Vector(f, &read_tensors_, "rope_freqs.weight", c.n_rot / 2));
  }
  if (f.FindTensor("output.weight") != nullptr) {
    BRAID_ASSIGN_OR_RETURN(output_, Matrix(f, &read_tensors_, "output.weight",
                                           c.n_vocab, c.n_embd));
  } else {
    output_ = token_embd_;  // Tied embeddings.
  }
  if (f.FindTensor("stream_embd.weight") != nullptr) {
    k::WeightMatrix se;
    BRAID_ASSIGN_OR_RETURN(se, Matrix(f, &read_tensors_, "stream_embd.weight",
                                      c.n_streams, c.n_embd));
    stream_embd_.resize(static_cast<size_t>(c.n_streams) * c.n_embd);
    for (int s = 0; s < c.n_streams; ++s) {
      k::DequantizeRow(se.type, se.Row(s),
                       stream_embd_.data() + static_cast<size_t>(s) * c.n_embd,
                       c.n_embd);
    }
  }
  layers_.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    BRAID_RETURN_IF_ERROR(BindLayer(il));
  }
  Repack(f, &output_, packed_matmul_, &pool_);
  return absl::OkStatus();
}

absl::Status LlamaModel::BindLayer(int il) {
  const GgufFile& f = *file_;
  const LlamaConfig& c = config_;
  const int q_dim = c.n_head * c.head_dim;
  Layer& l = layers_[il];
  const std::string p = absl::StrCat("blk.", il, ".");
  BRAID_ASSIGN_OR_RETURN(
      l.attn_norm, Vector(f, &read_tensors_, p + "attn_norm.weight", c.n_embd));
  BRAID_ASSIGN_OR_RETURN(
      l.ffn_norm, Vector(f, &read_tensors_, p + "ffn_norm.weight", c.n_embd));
  BRAID_ASSIGN_OR_RETURN(
      l.wq, Matrix(f, &read_tensors_, p + "attn_q.weight", q_dim, c.n_embd));
  BRAID_ASSIGN_OR_RETURN(l.wk, Matrix(f, &read_tensors_, p + "attn_k.weight",
                                      c.kv_dim(), c.n_embd));
  BRAID_ASSIGN_OR_RETURN(l.wv, Matrix(f, &read_tensors_, p + "attn_v.weight",
                                      c.kv_dim(), c.n_embd));
  BRAID_ASSIGN_OR_RETURN(
      l.wo,
      Matrix(f, &read_tensors_, p + "attn_output.weight", c.n_embd, q_dim));
  BRAID_ASSIGN_OR_RETURN(
      l.w_gate,
      Matrix(f, &read_tensors_, p + "ffn_gate.weight", c.n_ff, c.n_embd));
  BRAID_ASSIGN_OR_RETURN(
      l.w_up, Matrix(f, &read_tensors_, p + "ffn_up.weight", c.n_ff, c.n_embd));
  BRAID_ASSIGN_OR_RETURN(
      l.w_down,
      Matrix(f, &read_tensors_, p + "ffn_down.weight", c.n_embd, c.n_ff));
  if (c.traits.qkv_bias) {
    BRAID_ASSIGN_OR_RETURN(l.bq,
                           Vector(f, &read_tensors_, p + "attn_q.bias", q_dim));
    BRAID_ASSIGN_OR_RETURN(
        l.bk, Vector(f, &read_tensors_, p + "attn_k.bias", c.kv_dim()));
    BRAID_ASSIGN_OR_RETURN(
        l.bv, Vector(f, &read_tensors_, p + "attn_v.bias", c.kv_dim()));
  }
  if (c.traits.gemma) {
    BRAID_ASSIGN_OR_RETURN(
        l.post_attn_norm,
        Vector(f, &read_tensors_, p + "post_attention_norm.weight", c.n_embd));
    BRAID_ASSIGN_OR_RETURN(
        l.post_ffn_norm,
        Vector(f, &read_tensors_, p + "post_ffw_norm.weight", c.n_embd));
  }
  if (c.traits.qk_norm) {
    BRAID_ASSIGN_OR_RETURN(
        l.q_norm,
        Vector(f, &read_tensors_, p + "attn_q_norm.weight", c.head_dim));
    BRAID_ASSIGN_OR_RETURN(
        l.k_norm,
        Vector(f, &read_tensors_, p + "attn_k_norm.weight", c.head_dim));
  }
  for (k::WeightMatrix* w :
       {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
    Repack(f, w, packed_matmul_, &pool_);
  }
  return absl::OkStatus();
}

void LlamaModel::DescribeInfo() {
  info_ = DescribeModel(config_, *file_, "cpu");
}

std::string LlamaModel::DescribeTensorTypes() const {
  std::map<std::string, int> counts;
  for (const GgufTensor& t : file_->tensors()) {
    ++counts[GgmlTypeName(static_cast<uint32_t>(t.type))];
  }
  std::vector<std::pair<int, std::string>> order;
  for (const auto& [name, n] : counts) order.emplace_back(-n, name);
  std::sort(order.begin(), order.end());
  std::string out;
  for (const auto& [n, name] : order) {
    absl::StrAppend(&out, out.empty() ? "" : ", ", name, " x", -n);
  }
  return out;
}

std::vector<std::string> LlamaModel::UnusedTensors() const {
  std::vector<std::string> unused;
  for (const GgufTensor& t : file_->tensors()) {
    if (!read_tensors_.contains(t.name)) unused.push_back(t.name);
  }
  return unused;
}

int64_t LlamaModel::WeightBytes() const {
  auto bytes = [](const k::WeightMatrix& w) {
    return static_cast<int64_t>(k::DTypeRowBytes(w.type, w.cols)) * w.rows;
  };
  int64_t total = bytes(output_);
  for (const Layer& l : layers_) {
    for (const k::WeightMatrix* w :
         {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      total += bytes(*w);
    }
  }
  return total;
}

PagedKvPool LlamaModel::NewPagedKvPool(int block_size, int num_blocks) const {
  return PagedKvPool(config_.n_layer, config_.kv_dim(), block_size, num_blocks);
}

std::unique_ptr<KvCache> LlamaModel::NewKvCache(int block_size,
                                                int num_blocks) const {
  return std::make_unique<PagedKvPool>(config_.n_layer, config_.kv_dim(),
                                       block_size, num_blocks);
}

int64_t LlamaModel::KvBlockBytes(int block_size) const {
  return PagedKvPool::BlockBytes(config_.n_layer, config_.kv_dim(), block_size);
}

}  // namespace braid::model
