#include "server/load_model.h"

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/cpu/llama.h"
#include "model/gguf.h"
#include "model/tokenizer/gguf_loader.h"
#ifdef BRAID_WITH_CUDA
#include "kernels/cuda/cuda_probe.h"
#include "model/cuda/cuda_model.h"
#endif

namespace braid::server {
namespace {

// The chat template: --chat_template's (a family name or a Jinja file),
// which must be one braid renders, else the file's, when braid recognises
// it.
absl::Status LoadChatTemplate(const model::GgufFile& file,
                              const std::string& flag, LoadedModel* m) {
  absl::StatusOr<std::string> source = flag;
  if (flag.empty()) {
    source = file.GetString("tokenizer.chat_template");
    if (!source.ok()) return absl::OkStatus();
  } else if (std::ifstream in(flag); in) {
    std::stringstream text;
    text << in.rdbuf();
    source = text.str();
  }
  auto t = model::ChatTemplate::FromSource(
      *source, m->tokenizer->TokenBytes(m->tokenizer->bos_id()),
      m->tokenizer->TokenBytes(m->tokenizer->eos_id()));
  if (!t.ok() && !flag.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--chat_template=", flag, ": ", t.status().message()));
  }
  if (!t.ok()) {
    std::fprintf(stderr, "braidd: chat prompts disabled: %s\n",
                 std::string(t.status().message()).c_str());
    return absl::OkStatus();
  }
  m->chat_template = std::make_unique<model::ChatTemplate>(*std::move(t));
  m->info.chat_template_name = std::string(m->chat_template->name());
  return absl::OkStatus();
}

// What the CPU model made of the file, for the load log.
void LogCpuModel(const model::LlamaModel& llama) {
  const model::LlamaConfig& config = llama.config();
  // Weights stay in the file's types; only norms, biases and rope factors
  // are read as f32.
  std::fprintf(stderr,
               "braidd: tensors %s (matrices multiplied in their own types; "
               "norms, biases and rope factors read as F32)\n",
               llama.DescribeTensorTypes().c_str());
  if (config.sliding_window > 0) {
    int sliding = 0;
    for (int il = 0; il < config.n_layer; ++il) sliding += config.Slides(il);
    std::fprintf(stderr,
                 "braidd: sliding-window attention over %d positions on %d of "
                 "%d layers (their K/V kept whole)\n",
                 config.sliding_window, sliding, config.n_layer);
  }
  if (const std::vector<std::string> unused = llama.UnusedTensors();
      !unused.empty()) {
    std::fprintf(stderr, "braidd: %zu tensors not used: %s\n", unused.size(),
                 absl::StrJoin(unused, ", ").c_str());
  }
}

// The CUDA device --device names: its ordinal, or -1 for the CPU.
absl::StatusOr<int> ParseDevice(const std::string& device) {
  if (device == "cpu") return -1;
  if (device == "auto") {
#ifdef BRAID_WITH_CUDA
    return kernels::cuda::DeviceCount(nullptr) > 0 ? 0 : -1;
#else
    return -1;
#endif
  }
  int ordinal = 0;
  if (device != "cuda" &&
      !(absl::StartsWith(device, "cuda:") &&
        absl::SimpleAtoi(device.substr(5), &ordinal) && ordinal >= 0)) {
    return absl::InvalidArgumentError("--device=" + device +
                                      ": must be cpu, auto or cuda[:N]");
  }
#ifdef BRAID_WITH_CUDA
  return ordinal;
#else
  return absl::UnimplementedError(
      "--device=" + device +
      ": this braidd was built without the CUDA executor; build it with "
      "`bazel build --config=cuda //server:braidd`, or use --device=cpu");
#endif
}

#ifdef BRAID_WITH_CUDA
absl::Status LoadOnGpu(const DaemonFlags& flags, int device,
                       std::unique_ptr<model::GgufFile> file, LoadedModel* m) {
  model::CudaLoadOptions opts;
  opts.device = device;
  opts.max_tokens = flags.engine.max_batch_tokens;
  opts.cuda_graphs = flags.cuda_graphs;
  opts.dependent_launch = flags.cuda_pdl;
  auto cuda = model::CudaModel::Load(std::move(file), opts);
  if (!cuda.ok()) return cuda.status();
  std::fprintf(stderr, "braidd: on cuda:%d, %.2f GiB of BF16 weights\n", device,
               (*cuda)->WeightBytes() / double{1 << 30});
  if (flags.engine.kv_budget_tokens == 0) {
    auto blocks = (*cuda)->KvBlocksForFreeMemory(flags.engine.block_size,
                                                 flags.gpu_memory_fraction);
    if (!blocks.ok()) return blocks.status();
    m->kv_budget_tokens = *blocks * flags.engine.block_size;
  }
  m->lookahead_slots = 1;
  m->model = *std::move(cuda);
  return absl::OkStatus();
}
#endif

}  // namespace

absl::StatusOr<LoadedModel> LoadModel(const DaemonFlags& flags) {
  auto device = ParseDevice(flags.device);
  if (!device.ok()) return device.status();
  const std::string& path = flags.model_path;
  LoadedModel m;
  auto file = model::GgufFile::Open(path);
  if (!file.ok()) return file.status();
  auto tokenizer_data = model::TokenizerDataFromGguf(**file);
  if (!tokenizer_data.ok()) return tokenizer_data.status();
  auto tokenizer = model::Tokenizer::Create(*std::move(tokenizer_data));
  if (!tokenizer.ok()) return tokenizer.status();
  m.tokenizer = *std::move(tokenizer);
  if (absl::Status s = LoadChatTemplate(**file, flags.chat_template, &m);
      !s.ok()) {
    return s;
  }
  model::LoadOptions load_options;
  load_options.num_threads = flags.threads;
  load_options.packed_matmul = flags.packed_matmul;
#ifdef BRAID_WITH_CUDA
  if (*device >= 0) {
    if (absl::Status s = LoadOnGpu(flags, *device, *std::move(file), &m);
        !s.ok()) {
      return s;
    }
  }
#endif
  if (m.model == nullptr) {
    auto llama = model::LlamaModel::Load(*std::move(file), load_options);
    if (!llama.ok()) return llama.status();
    LogCpuModel(**llama);
    m.model = *std::move(llama);
  }
  m.info.model_path = path;
  struct stat st;
  if (stat(path.c_str(), &st) == 0) m.info.file_size_bytes = st.st_size;
  m.info.context_length =
      std::min<int>(flags.context_length, m.model->info().n_ctx_train);
  m.info.num_threads =
      load_options.num_threads > 0
          ? load_options.num_threads
          : static_cast<int>(std::thread::hardware_concurrency());
  return m;
}

}  // namespace braid::server
