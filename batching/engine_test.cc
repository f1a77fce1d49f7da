#include "batching/engine.h"

#include <cstdlib>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "model/gguf.h"
#include "model/tokenizer/gguf_loader.h"

namespace braid::batching {
namespace {

// Records every chunk; Wait blocks until the final chunk (with a deadline).
class RecordingSink : public OutputSink {
 public:
  void Push(OutputChunk chunk) override {
    absl::MutexLock lock(&mu_);
    if (chunks_.empty()) first_push_ = absl::Now();
    chunks_.push_back(std::move(chunk));
  }

  const OutputChunk& WaitFinal() {
    absl::MutexLock lock(&mu_);
    auto done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return !chunks_.empty() && chunks_.back().final;
    };
    EXPECT_TRUE(mu_.AwaitWithTimeout(absl::Condition(&done), absl::Seconds(60)))
        << "no final chunk within 60 s";
    return chunks_.back();
  }

  std::vector<int32_t> Tokens() {
    absl::MutexLock lock(&mu_);
    std::vector<int32_t> ids;
    for (const auto& c : chunks_) {
      ids.insert(ids.end(), c.token_ids.begin(), c.token_ids.end());
    }
    return ids;
  }

  absl::Time first_push() {
    absl::MutexLock lock(&mu_);
    return first_push_;
  }

 private:
  absl::Mutex mu_;
  std::vector<OutputChunk> chunks_ ABSL_GUARDED_BY(mu_);
  absl::Time first_push_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
};

class EngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const char* path = std::getenv("BRAID_MODEL");
    ASSERT_NE(path, nullptr) << "set BRAID_MODEL (make test does)";
    auto file = model::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto data = model::TokenizerDataFromGguf(**file);
    ASSERT_TRUE(data.ok()) << data.status();
    auto tok = model::Tokenizer::Create(*std::move(data));
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer_ = tok->release();
    auto llama = model::LlamaModel::Load(*std::move(file), {});
    ASSERT_TRUE(llama.ok()) << llama.status();
    model_ = llama->release();
  }

  static GenerationRequest Request(int max_tokens, int priority = 0) {
    GenerationRequest r;
    r.prompt = tokenizer_->Encode("Once upon a time", false, true);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.priority = priority;
    r.arrival = absl::Now();
    return r;
  }

  static inline model::Tokenizer* tokenizer_ = nullptr;
  static inline model::LlamaModel* model_ = nullptr;
};

TEST_F(EngineTest, GeneratesAndReleasesEverything) {
  Engine engine(model_, tokenizer_, {.max_running = 2});
  auto sink = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine.Submit(Request(6), sink).ok());
  const OutputChunk& last = sink->WaitFinal();
  EXPECT_EQ(last.finish_reason, FinishReason::kLength);
  EXPECT_EQ(last.output_tokens, 6);
  EXPECT_EQ(sink->Tokens().size(), 6u);
  EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.running, 0);
  EXPECT_EQ(stats.waiting, 0);
  EXPECT_EQ(stats.kv_tokens_reserved, 0);
  EXPECT_EQ(stats.completed, 1);
}

TEST_F(EngineTest, CancelWhileQueuedAndWhileRunning) {
  Engine engine(model_, tokenizer_, {.max_running = 1});
  auto running = std::make_shared<RecordingSink>();
  auto queued = std::make_shared<RecordingSink>();
  auto r = engine.Submit(Request(2000), running);
  auto q = engine.Submit(Request(5), queued);
  ASSERT_TRUE(r.ok() && q.ok());
  engine.Cancel(*q);
  const OutputChunk& q_last = queued->WaitFinal();
  EXPECT_EQ(q_last.finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(queued->Tokens().empty());
  engine.Cancel(*r);
  EXPECT_EQ(running->WaitFinal().finish_reason, FinishReason::kCancelled);
  EngineStats stats = engine.Stats();
  EXPECT_EQ(stats.running + stats.waiting, 0);
  EXPECT_EQ(stats.kv_tokens_reserved, 0);
  EXPECT_EQ(stats.cancelled, 2);
}

TEST_F(EngineTest, WaitingQueueIsBounded) {
  Engine engine(model_, tokenizer_, {.max_running = 1, .max_waiting = 2});
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  std::vector<uint64_t> handles;
  int rejected = 0;
  for (int i = 0; i < 6; ++i) {
    sinks.push_back(std::make_shared<RecordingSink>());
    auto h = engine.Submit(Request(400), sinks.back());
    if (h.ok()) {
      handles.push_back(*h);
    } else {
      EXPECT_EQ(h.status().code(), absl::StatusCode::kResourceExhausted);
      EXPECT_NE(h.status().message().find("waiting queue is full"),
                std::string::npos);
      ++rejected;
    }
  }
  EXPECT_GE(rejected, 3);  // at most 1 running + 2 waiting accepted
  for (uint64_t h : handles) engine.Cancel(h);
}

TEST_F(EngineTest, HigherPriorityRunsFirst) {
  Engine engine(model_, tokenizer_, {.max_running = 1});
  auto blocker = std::make_shared<RecordingSink>();
  auto low = std::make_shared<RecordingSink>();
  auto high = std::make_shared<RecordingSink>();
  ASSERT_TRUE(engine.Submit(Request(20), blocker).ok());
  ASSERT_TRUE(engine.Submit(Request(3, /*priority=*/-5), low).ok());
  ASSERT_TRUE(engine.Submit(Request(3, /*priority=*/5), high).ok());
  low->WaitFinal();
  high->WaitFinal();
  EXPECT_LT(high->first_push(), low->first_push());
}

TEST_F(EngineTest, SameSeedSameTokensAcrossRequests) {
  Engine engine(model_, tokenizer_, {.max_running = 4});
  std::vector<std::shared_ptr<RecordingSink>> sinks;
  for (int i = 0; i < 3; ++i) {
    GenerationRequest r = Request(12);
    r.sampling.temperature = 0.8f;
    r.sampling.seed = i < 2 ? 77 : 78;
    sinks.push_back(std::make_shared<RecordingSink>());
    ASSERT_TRUE(engine.Submit(std::move(r), sinks.back()).ok());
  }
  for (auto& s : sinks) s->WaitFinal();
  EXPECT_EQ(sinks[0]->Tokens(), sinks[1]->Tokens());
  EXPECT_NE(sinks[0]->Tokens(), sinks[2]->Tokens());
}

TEST_F(EngineTest, ShutdownCancelsInFlightWork) {
  auto sink = std::make_shared<RecordingSink>();
  {
    Engine engine(model_, tokenizer_, {});
    ASSERT_TRUE(engine.Submit(Request(3000), sink).ok());
  }
  EXPECT_EQ(sink->WaitFinal().finish_reason, FinishReason::kCancelled);
}

}  // namespace
}  // namespace braid::batching
