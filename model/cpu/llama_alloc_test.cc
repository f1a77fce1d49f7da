// The step loop allocates nothing: after a warm-up step of the same shape,
// LlamaModel::Forward over a paged pool performs no heap allocation (counted
// by replacing the global operator new in this test binary).
#include <atomic>
#include <cstdlib>
#include <new>
#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "model/batch.h"
#include "model/cpu/llama.h"
#include "model/cpu/paged_kv.h"
#include "model/gguf.h"
#include "model/testing/random_llama.h"

namespace {
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
}  // namespace

void* operator new(size_t size) {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1);
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t size) { return operator new(size); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }

namespace braid::model {
namespace {

// Parameters: LoadOptions::packed_matmul; threads and decoding sequences:
// 4 threads and 4 sequences (every step row-parallel), 2 threads and 8 (both
// ways, whichever is faster and the other probed), 2 threads and 16
// sequences (every step data-parallel: each thread's part on its own
// scratch, LlamaModel::data_parallel_steps).
class LlamaAllocTest
    : public ::testing::TestWithParam<std::tuple<bool, std::pair<int, int>>> {};

TEST_P(LlamaAllocTest, DecodeStepsAllocateNothing) {
  const auto [packed, shape] = GetParam();
  const auto [threads, seqs] = shape;
  testing::RandomLlamaSpec spec;
  spec.n_ctx_train = 512;
  auto file = GgufFile::FromBytes(testing::MakeRandomLlamaGguf(spec));
  ASSERT_TRUE(file.ok());
  // More threads than cores: which thread takes which task is chance, and
  // every thread must have its scratch before the counted steps.
  LoadOptions opts{threads};
  opts.packed_matmul = packed;
  auto model = LlamaModel::Load(*std::move(file), opts);
  ASSERT_TRUE(model.ok());
  constexpr int kBlockSize = 16, kBlocksPerSeq = 8;
  PagedKvPool pool = (*model)->NewPagedKvPool(kBlockSize, seqs * kBlocksPerSeq);
  // A batch of decoding sequences, updated in place each step (as an engine
  // reuses its batch).
  Batch batch;
  for (int s = 0; s < seqs; ++s) {
    BatchSequence seq;
    seq.first_token = s;
    seq.num_tokens = 1;
    for (int b = 0; b < kBlocksPerSeq; ++b) {
      seq.block_table.push_back(s * kBlocksPerSeq + b);
    }
    batch.sequences.push_back(seq);
    batch.tokens.push_back(s + 1);
    batch.meta.push_back(EntryMeta{0, 0});
  }
  std::vector<float> logits;
  auto step = [&] {
    ASSERT_TRUE((*model)->Forward(batch, pool, &logits).ok());
    for (int s = 0; s < seqs; ++s) {
      batch.tokens[s] = (batch.tokens[s] * 7 + 3) % spec.n_vocab;
      ++batch.meta[s].y;
      ++batch.sequences[s].num_cached;
    }
  };
  for (int i = 0; i < 20; ++i) step();  // Warm-up: scratch reaches its size.
  const int64_t parallel = (*model)->data_parallel_steps();
  allocations.store(0);
  counting.store(true);
  for (int i = 0; i < 40; ++i) step();
  counting.store(false);
  EXPECT_EQ(allocations.load(), 0);
  const int64_t data = (*model)->data_parallel_steps() - parallel;
  if (seqs == 8) {  // 4 a thread: either way (SplitChooser), each probed
    EXPECT_GT(data, 0);
    EXPECT_LT(data, 40);
  } else {
    EXPECT_EQ(data, seqs >= 16 ? 40 : 0);
  }
  // The counter works: a vector allocates.
  counting.store(true);
  std::vector<int>* v = new std::vector<int>(10);
  counting.store(false);
  delete v;
  EXPECT_EQ(allocations.load(), 2);
}

INSTANTIATE_TEST_SUITE_P(
    ArithmeticAndSplit, LlamaAllocTest,
    ::testing::Combine(::testing::Bool(),
                       ::testing::Values(std::pair<int, int>{4, 4},
                                         std::pair<int, int>{2, 8},
                                         std::pair<int, int>{2, 16})));

}  // namespace
}  // namespace braid::model
