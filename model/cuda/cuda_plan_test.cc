#include "model/cuda/cuda_plan.h"

#include "gtest/gtest.h"

namespace braid::model {
namespace {

namespace k = ::braid::kernels::cuda;

// Llama-3.1-8B's shape.
LlamaConfig Llama8B() {
  LlamaConfig c;
  c.arch = "llama";
  c.n_vocab = 128256;
  c.n_layer = 32;
  c.n_embd = 4096;
  c.n_ff = 14336;
  c.n_head = 32;
  c.n_head_kv = 8;
  c.head_dim = 128;
  c.n_rot = 128;
  return c;
}

TEST(CudaPlanTest, Llama8BWeightsAndProducts) {
  const CudaPlan p = PlanCudaModel(Llama8B(), /*tied_output=*/false, 512);
  EXPECT_EQ(p.qkv_rows(), 4096 + 2 * 1024);
  // The 8B model's 8.03e9 parameters, less its norms, in BF16.
  EXPECT_EQ(p.WeightBytes(), 2 * (32 * (6144LL * 4096 + 4096LL * 4096 +
                                        2 * 14336LL * 4096 + 4096LL * 14336) +
                                  2 * 128256LL * 4096));
  EXPECT_NEAR(p.WeightBytes() / 1e9, 16.06, 0.01);
  ASSERT_EQ(p.shapes.size(), static_cast<size_t>(kNumCudaProducts));
  EXPECT_EQ(p.shapes[kQkvProduct].n, 6144);
  EXPECT_EQ(p.shapes[kQkvProduct].epilogue, k::GemmEpilogue::kNone);
  EXPECT_EQ(p.shapes[kOutProduct].epilogue, k::GemmEpilogue::kResidual);
  EXPECT_EQ(p.shapes[kGateUpProduct].n, 2 * 14336);
  EXPECT_EQ(p.shapes[kDownProduct].k, 14336);
  EXPECT_EQ(p.shapes[kDownProduct].epilogue, k::GemmEpilogue::kResidual);
  EXPECT_EQ(p.shapes[kVocabProduct].n, 128256);
}

TEST(CudaPlanTest, ArchitecturesPickTheirEpilogues) {
  LlamaConfig qwen2 = Llama8B();
  qwen2.traits.qkv_bias = true;
  EXPECT_EQ(PlanCudaModel(qwen2, true, 8).shapes[kQkvProduct].epilogue,
            k::GemmEpilogue::kBias);
  LlamaConfig gemma = Llama8B();
  gemma.traits.gemma = true;
  const CudaPlan g = PlanCudaModel(gemma, true, 8);
  EXPECT_EQ(g.shapes[kOutProduct].epilogue, k::GemmEpilogue::kNone);
  EXPECT_EQ(g.shapes[kDownProduct].epilogue, k::GemmEpilogue::kNone);
  EXPECT_EQ(g.output_elements, 0);
}

TEST(CudaPlanTest, ArenaBuffersAreAlignedAndDisjoint) {
  const CudaPlan p = PlanCudaModel(Llama8B(), false, 37);
  for (int b = 0; b < kNumCudaBuffers; ++b) {
    EXPECT_EQ(p.buffer_offset[b] % 256, 0) << b;
    const int64_t end =
        b + 1 < kNumCudaBuffers ? p.buffer_offset[b + 1] : p.arena_bytes;
    EXPECT_LT(p.buffer_offset[b], end) << b;
  }
  // The largest buffer: 37 rows of logits.
  EXPECT_GE(p.arena_bytes - p.buffer_offset[kLogits], 4LL * 37 * 128256);
}

TEST(CudaPlanTest, KvBlocksFromFreeMemory) {
  const LlamaConfig c = Llama8B();
  // 16 entries x 32 layers x (K + V) x 1024 x fp16, plus 16 tags.
  EXPECT_EQ(CudaKvBlockBytes(c, 16), 16 * (32LL * 2 * 1024 * 2 + 8));
  const int64_t block = CudaKvBlockBytes(c, 16);
  EXPECT_EQ(CudaKvBlocksFor(100 * block, 0.5, 0, block), 50);
  EXPECT_EQ(CudaKvBlocksFor(100 * block, 0.5, 10 * block, block), 40);
  EXPECT_EQ(CudaKvBlocksFor(100 * block, 0.5, 60 * block, block), 0);
  EXPECT_EQ(CudaKvBlocksFor(100 * block, 0.0, 0, block), 0);
  EXPECT_EQ(CudaKvBlocksFor(100 * block, 2.0, 0, block), 100);
}

}  // namespace
}  // namespace braid::model
