// CudaModel's loading: the file's tensors checked as the CPU model checks
// them, uploaded as they are and dequantized into BF16 device matrices on
// the GPU; the vectors (norms, biases, rope factors) as f32; then the
// products' plans and the activation arena.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "kernels/cpu/quant/quant.h"
#include "kernels/cuda/attention.h"
#include "kernels/cuda/dequant.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/status.h"
#include "model/cuda/cuda_model.h"
#include "model/cuda/cuda_model_state.h"
#include "util/status_macros.h"

namespace braid::model {
namespace {

namespace kc = ::braid::kernels::cuda;
namespace kcpu = ::braid::kernels::cpu;

// The f32 values of the vector `name` of n elements (any float type) into
// dst [n] on the host.
absl::Status ReadVector(const CudaModel::State& s, const std::string& name,
                        int64_t n, float* dst) {
  const GgufTensor* t = s.file->FindTensor(name);
  if (t == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
  }
  if (t->num_elements() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor ", name, " must have ", n, " elements"));
  }
  kcpu::DequantizeRow(static_cast<kcpu::DType>(t->type), t->data, dst, n);
  return absl::OkStatus();
}

// A device copy of `host`, kept in s.vectors.
absl::StatusOr<const float*> UploadFloats(CudaModel::State& s,
                                          const std::vector<float>& host,
                                          const std::string& what) {
  const size_t bytes = host.size() * sizeof(float);
  BRAID_ASSIGN_OR_RETURN(kc::DeviceBuffer buf,
                         kc::DeviceBuffer::Allocate(bytes, what));
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaMemcpy(buf.data(), host.data(), bytes, cudaMemcpyHostToDevice));
  s.vectors.push_back(std::move(buf));
  return s.vectors.back().as<float>();
}

// The f32 vector `name` of n elements, on the device.
absl::StatusOr<const float*> UploadVector(CudaModel::State& s,
                                          const std::string& name, int64_t n) {
  std::vector<float> host(n);
  BRAID_RETURN_IF_ERROR(ReadVector(s, name, n, host.data()));
  return UploadFloats(s, host, name);
}

// The optional vector `name`: null when the file lacks it.
absl::StatusOr<const float*> OptionalVector(CudaModel::State& s,
                                            const std::string& name,
                                            int64_t n) {
  if (s.file->FindTensor(name) == nullptr) return nullptr;
  return UploadVector(s, name, n);
}

// Loads matrices into BF16 device memory: each tensor's bytes through one
// staging buffer, dequantized on the stream into its place.
class MatrixLoader {
 public:
  explicit MatrixLoader(CudaModel::State& s) : s_(s) {}

  // The tensor `name` [rows, cols] (checked) into dst rows [0, rows).
  absl::Status Load(const std::string& name, int64_t rows, int64_t cols,
                    uint16_t* dst) {
    const GgufTensor* t = s_.file->FindTensor(name);
    if (t == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("missing tensor ", name));
    }
    if (t->dims.size() != 2 || t->dims[0] != cols || t->dims[1] != rows) {
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor ", name, " has shape [", absl::StrJoin(t->dims, ","),
          "], want [", cols, ",", rows, "]"));
    }
    const size_t bytes =
        kcpu::DTypeRowBytes(static_cast<kcpu::DType>(t->type), cols) * rows;
    if (bytes > t->size_bytes) {
      return absl::InvalidArgumentError(
          absl::StrCat("tensor ", name, " is shorter than its shape"));
    }
    if (bytes > staging_.bytes()) {
      // The stream may still read the old buffer.
      BRAID_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_.stream));
      BRAID_ASSIGN_OR_RETURN(
          staging_, kc::DeviceBuffer::Allocate(bytes, "weight upload buffer"));
    }
    BRAID_CUDA_RETURN_IF_ERROR(cudaMemcpyAsync(
        staging_.data(), t->data, bytes, cudaMemcpyHostToDevice, s_.stream));
    absl::Status st =
        kc::DequantizeToBf16(static_cast<uint32_t>(t->type), staging_.data(),
                             rows * cols, dst, s_.stream);
    if (st.code() == absl::StatusCode::kInvalidArgument) {
      return absl::UnimplementedError(
          absl::StrCat("tensor ", name, ": type ",
                       GgmlTypeName(static_cast<uint32_t>(t->type)),
                       " has no CUDA dequantization (", st.message(), ")"));
    }
    return st;
  }

  absl::Status Finish() {
    BRAID_CUDA_RETURN_IF_ERROR(cudaStreamSynchronize(s_.stream));
    staging_ = kc::DeviceBuffer();
    return absl::OkStatus();
  }

 private:
  CudaModel::State& s_;
  kc::DeviceBuffer staging_;
};

absl::Status LoadLayer(CudaModel::State& s, MatrixLoader& loader, int il,
                       uint16_t* w) {
  const LlamaConfig& c = s.config;
  const CudaPlan& p = s.plan;
  const std::string b = absl::StrCat("blk.", il, ".");
  CudaModel::State::Layer& l = s.layers[il];
  const int64_t e = c.n_embd;
  uint16_t* qkv = w;
  uint16_t* out = qkv + int64_t{p.qkv_rows()} * e;
  uint16_t* gate_up = out + e * p.q_dim;
  uint16_t* down = gate_up + int64_t{2} * c.n_ff * e;
  BRAID_RETURN_IF_ERROR(loader.Load(b + "attn_q.weight", p.q_dim, e, qkv));
  BRAID_RETURN_IF_ERROR(
      loader.Load(b + "attn_k.weight", p.kv_dim, e, qkv + p.q_dim * e));
  BRAID_RETURN_IF_ERROR(loader.Load(b + "attn_v.weight", p.kv_dim, e,
                                    qkv + (p.q_dim + p.kv_dim) * e));
  BRAID_RETURN_IF_ERROR(loader.Load(b + "attn_output.weight", e, p.q_dim, out));
  BRAID_RETURN_IF_ERROR(loader.Load(b + "ffn_gate.weight", c.n_ff, e, gate_up));
  BRAID_RETURN_IF_ERROR(
      loader.Load(b + "ffn_up.weight", c.n_ff, e, gate_up + c.n_ff * e));
  BRAID_RETURN_IF_ERROR(loader.Load(b + "ffn_down.weight", e, c.n_ff, down));
  l.qkv = qkv;
  l.out = out;
  l.gate_up = gate_up;
  l.down = down;
  BRAID_ASSIGN_OR_RETURN(l.attn_norm,
                         UploadVector(s, b + "attn_norm.weight", e));
  BRAID_ASSIGN_OR_RETURN(l.ffn_norm, UploadVector(s, b + "ffn_norm.weight", e));
  if (c.traits.qkv_bias) {
    // One [q_dim + 2 kv_dim] vector: the three biases end to end.
    std::vector<float> bias(p.qkv_rows());
    BRAID_RETURN_IF_ERROR(
        ReadVector(s, b + "attn_q.bias", p.q_dim, bias.data()));
    BRAID_RETURN_IF_ERROR(
        ReadVector(s, b + "attn_k.bias", p.kv_dim, bias.data() + p.q_dim));
    BRAID_RETURN_IF_ERROR(ReadVector(s, b + "attn_v.bias", p.kv_dim,
                                     bias.data() + p.q_dim + p.kv_dim));
    BRAID_ASSIGN_OR_RETURN(l.qkv_bias, UploadFloats(s, bias, b + "biases"));
  }
  if (c.traits.qk_norm) {
    BRAID_ASSIGN_OR_RETURN(
        l.q_norm, UploadVector(s, b + "attn_q_norm.weight", c.head_dim));
    BRAID_ASSIGN_OR_RETURN(
        l.k_norm, UploadVector(s, b + "attn_k_norm.weight", c.head_dim));
  }
  if (c.traits.gemma) {
    BRAID_ASSIGN_OR_RETURN(
        l.post_attn_norm, UploadVector(s, b + "post_attention_norm.weight", e));
    BRAID_ASSIGN_OR_RETURN(l.post_ffn_norm,
                           UploadVector(s, b + "post_ffw_norm.weight", e));
  }
  return absl::OkStatus();
}

absl::Status LoadWeights(CudaModel::State& s) {
  const LlamaConfig& c = s.config;
  const CudaPlan& p = s.plan;
  BRAID_ASSIGN_OR_RETURN(
      s.weights, kc::DeviceBuffer::Allocate(p.WeightBytes(), "BF16 weights"));
  MatrixLoader loader(s);
  uint16_t* w = s.weights.as<uint16_t>();
  s.layers.resize(c.n_layer);
  for (int il = 0; il < c.n_layer; ++il) {
    BRAID_RETURN_IF_ERROR(LoadLayer(s, loader, il, w));
    w += p.layer_weight_elements;
  }
  BRAID_RETURN_IF_ERROR(
      loader.Load("token_embd.weight", c.n_vocab, c.n_embd, w));
  s.embd = w;
  s.output = w;
  w += p.embd_elements;
  if (!p.tied_output) {
    BRAID_RETURN_IF_ERROR(loader.Load("output.weight", c.n_vocab, c.n_embd, w));
    s.output = w;
  }
  BRAID_RETURN_IF_ERROR(loader.Finish());
  BRAID_ASSIGN_OR_RETURN(s.output_norm,
                         UploadVector(s, "output_norm.weight", c.n_embd));
  BRAID_ASSIGN_OR_RETURN(s.rope_freqs,
                         OptionalVector(s, "rope_freqs.weight", c.n_rot / 2));
  if (s.file->FindTensor("stream_embd.weight") != nullptr) {
    BRAID_ASSIGN_OR_RETURN(
        s.stream_embd,
        UploadVector(s, "stream_embd.weight", int64_t{c.n_streams} * c.n_embd));
  }
  return absl::OkStatus();
}

}  // namespace

CudaModel::State::~State() {
  DropGraphs();
  for (int i = 0; i < 2; ++i) {
    for (MetaBuffers* m : {&step_meta, &graph_meta}) {
      if (m->host[i] != nullptr) cudaFreeHost(m->host[i]);
      if (m->copied[i] != nullptr) cudaEventDestroy(m->copied[i]);
    }
    Staging& g = staging[i];
    if (g.ids != nullptr) cudaFreeHost(g.ids);
    if (g.values != nullptr) cudaFreeHost(g.values);
    if (g.log_z != nullptr) cudaFreeHost(g.log_z);
    if (g.drawn != nullptr) cudaFreeHost(g.drawn);
    if (g.drawn_logit != nullptr) cudaFreeHost(g.drawn_logit);
    if (g.copied != nullptr) cudaEventDestroy(g.copied);
  }
  if (stream != nullptr) cudaStreamDestroy(stream);
}

CudaModel::CudaModel(std::unique_ptr<State> state) : s_(std::move(state)) {}
CudaModel::~CudaModel() = default;

absl::StatusOr<std::unique_ptr<CudaModel>> CudaModel::Load(
    std::unique_ptr<GgufFile> file, const CudaLoadOptions& opts) {
  BRAID_ASSIGN_OR_RETURN(LlamaConfig config, LlamaConfig::FromGguf(*file));
  if (opts.max_tokens < 1) {
    return absl::InvalidArgumentError("CudaModel: max_tokens < 1");
  }
  int devices = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaGetDeviceCount(&devices));
  if (opts.device < 0 || opts.device >= devices) {
    return absl::FailedPreconditionError(
        absl::StrCat("--device=cuda:", opts.device, ": this machine has ",
                     devices, " CUDA device(s)"));
  }
  BRAID_CUDA_RETURN_IF_ERROR(cudaSetDevice(opts.device));
  auto s = std::make_unique<State>();
  s->device = opts.device;
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaStreamCreateWithFlags(&s->stream, cudaStreamNonBlocking));
  for (int i = 0; i < 2; ++i) {
    for (State::MetaBuffers* m : {&s->step_meta, &s->graph_meta}) {
      BRAID_CUDA_RETURN_IF_ERROR(
          cudaEventCreateWithFlags(&m->copied[i], cudaEventDisableTiming));
    }
    BRAID_CUDA_RETURN_IF_ERROR(cudaEventCreateWithFlags(
        &s->staging[i].copied, cudaEventDisableTiming));
  }
  s->file = std::move(file);
  s->config = config;
  s->info = DescribeModel(config, *s->file, absl::StrCat("cuda:", opts.device));
  const bool tied = s->file->FindTensor("output.weight") == nullptr;
  s->plan = PlanCudaModel(config, tied, opts.max_tokens);
  s->m_buckets = kc::GemmBuckets(opts.max_tokens);
  s->use_graphs = opts.cuda_graphs;
  int major = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &major, cudaDevAttrComputeCapabilityMajor, opts.device));
  kc::SetDependentLaunch(opts.dependent_launch && major >= 9);
  BRAID_RETURN_IF_ERROR(LoadWeights(*s));
  constexpr size_t kGemmWorkspace = size_t{32} << 20;  // Hopper's advice
  BRAID_ASSIGN_OR_RETURN(
      s->gemm,
      kc::GemmPlans::Create(s->plan.shapes, opts.max_tokens, kGemmWorkspace));
  BRAID_ASSIGN_OR_RETURN(
      s->arena, kc::DeviceBuffer::Allocate(s->plan.arena_bytes, "activations"));
  // Padded rows of the products read the arena: never uninitialised.
  BRAID_CUDA_RETURN_IF_ERROR(
      cudaMemset(s->arena.data(), 0, s->plan.arena_bytes));
  int num_sms = 0;
  BRAID_CUDA_RETURN_IF_ERROR(cudaDeviceGetAttribute(
      &num_sms, cudaDevAttrMultiProcessorCount, opts.device));
  kc::CudaAttentionShape attention;  // the workspace depends on head_dim only
  attention.head_dim = config.head_dim;
  BRAID_ASSIGN_OR_RETURN(s->attention_workspace,
                         kc::DeviceBuffer::Allocate(
                             kc::AttentionWorkspaceBytes(attention, num_sms),
                             "attention workspace"));
  return std::unique_ptr<CudaModel>(new CudaModel(std::move(s)));
}

const ModelInfo& CudaModel::info() const { return s_->info; }
const LlamaConfig& CudaModel::config() const { return s_->config; }
int64_t CudaModel::WeightBytes() const { return s_->plan.WeightBytes(); }
void* CudaModel::stream() const { return s_->stream; }

int64_t CudaModel::KvBlockBytes(int block_size) const {
  return CudaKvBlockBytes(s_->config, block_size);
}

absl::StatusOr<int> CudaModel::KvBlocksForFreeMemory(int block_size,
                                                     double fraction) const {
  BRAID_ASSIGN_OR_RETURN(kc::DeviceMemoryInfo mem, kc::MemoryInfo());
  // What the steps still allocate: metadata and attention workspace, small
  // against the pool; keep 256 MiB for them and the CUDA context's growth.
  constexpr int64_t kReserve = int64_t{256} << 20;
  return CudaKvBlocksFor(mem.free, fraction, kReserve,
                         KvBlockBytes(block_size));
}

}  // namespace braid::model
