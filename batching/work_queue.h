// The queues the scheduler drains each step (docs/MULTISTREAM.md,
// "Scheduling").
//
// There are three instances of one interface: the prompt queue (prefill and
// recompute work), the reasoning queue (decode steps while the model thinks)
// and the I/O queue (decode steps of visible output). A queue holds the ids of
// requests that have work of its kind and answers one question: in what order
// should they be served now. The ordering policies (FIFO, priority, per-tenant
// fair share) live in streams/ (queues/work_queues.h), which sits above
// batching/; the engine receives the three queues from its owner, so the
// scheduler depends only on this interface.
//
// Owned by the Scheduler and used only on the engine thread; implementations
// need not be thread-safe.
#ifndef BRAID_BATCHING_WORK_QUEUE_H_
#define BRAID_BATCHING_WORK_QUEUE_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace braid::batching {

enum class QueueKind { kIo = 0, kReasoning = 1, kPrompt = 2 };
inline constexpr int kNumQueues = 3;

// Name for logs and tests: "io", "reasoning", "prompt".
inline const char* QueueName(QueueKind kind) {
  switch (kind) {
    case QueueKind::kIo:
      return "io";
    case QueueKind::kReasoning:
      return "reasoning";
    case QueueKind::kPrompt:
      return "prompt";
  }
  return "?";
}

// What a queue knows of a request.
struct WorkItem {
  uint64_t id = 0;
  int priority = 0;      // higher first where the policy looks at it
  std::string tenant;    // fair-share unit
  uint64_t arrival = 0;  // submission order, smaller = earlier
};

class WorkQueue {
 public:
  virtual ~WorkQueue() = default;

  // Adds an item; its id must not be in the queue.
  virtual void Push(const WorkItem& item) = 0;
  // Removes an item; unknown ids are ignored.
  virtual void Remove(uint64_t id) = 0;
  // Every id in the order the queue wants them served now.
  virtual std::vector<uint64_t> Ordered() const = 0;
  // Records that `id` was given `tokens` of a step (for fair share).
  virtual void Charge(uint64_t id, int tokens) = 0;
  virtual int size() const = 0;
};

// Indexed by QueueKind.
using WorkQueues = std::array<std::unique_ptr<WorkQueue>, kNumQueues>;

}  // namespace braid::batching

#endif  // BRAID_BATCHING_WORK_QUEUE_H_
