// The ordering policies of the three work queues (docs/MULTISTREAM.md,
// "Scheduling"): one batching::WorkQueue implementation, three policies.
//
// - kFifo: arrival order.
// - kPriority: higher priority first, then arrival.
// - kFairShare: higher priority first; among equal priority the tenant that
//   has been served the fewest tokens in this queue, then arrival. A tenant
//   that becomes active starts level with the least-served active tenant
//   (start-time fair queuing), so idle time is not banked as credit.
//
// The queues are created here and handed to the engine (server/main.cc):
// streams/ owns the policy, batching/ only sees the interface. Each queue is
// used only on the engine thread; not thread-safe.
#ifndef BRAID_QUEUES_WORK_QUEUES_H_
#define BRAID_QUEUES_WORK_QUEUES_H_

#include <memory>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "batching/work_queue.h"

namespace braid::queues {

enum class QueuePolicy { kFifo, kPriority, kFairShare };

// "fifo", "priority" or "fair".
absl::StatusOr<QueuePolicy> ParseQueuePolicy(absl::string_view name);

class PolicyQueue : public batching::WorkQueue {
 public:
  explicit PolicyQueue(QueuePolicy policy) : policy_(policy) {}

  void Push(const batching::WorkItem& item) override;
  void Remove(uint64_t id) override;
  std::vector<uint64_t> Ordered() const override;
  void Charge(uint64_t id, int tokens) override;
  int size() const override { return static_cast<int>(items_.size()); }

  // Tokens served to `tenant` (fair-share clock); 0 for unknown tenants.
  int64_t served(const std::string& tenant) const;

 private:
  struct Tenant {
    int64_t served = 0;
    int num_items = 0;
  };

  const QueuePolicy policy_;
  absl::flat_hash_map<uint64_t, batching::WorkItem> items_;
  absl::flat_hash_map<std::string, Tenant> tenants_;  // with items only
};

// The three queues, indexed by batching::QueueKind, all with `policy`.
batching::WorkQueues MakeWorkQueues(QueuePolicy policy);

}  // namespace braid::queues

#endif  // BRAID_QUEUES_WORK_QUEUES_H_
