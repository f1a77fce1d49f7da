// A WorkQueue that serves in arrival order, for batching/ tests. The real
// policies (FIFO, priority, per-tenant fair share) are in streams/.
#ifndef BRAID_BATCHING_TESTING_FIFO_QUEUE_H_
#define BRAID_BATCHING_TESTING_FIFO_QUEUE_H_

#include <algorithm>
#include <memory>
#include <vector>

#include "batching/work_queue.h"

namespace braid::batching::testing {

class FifoQueue : public WorkQueue {
 public:
  void Push(const WorkItem& item) override { items_.push_back(item); }
  void Remove(uint64_t id) override {
    items_.erase(std::remove_if(items_.begin(), items_.end(),
                                [id](const WorkItem& w) { return w.id == id; }),
                 items_.end());
  }
  std::vector<uint64_t> Ordered() const override {
    std::vector<WorkItem> sorted = items_;
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const WorkItem& a, const WorkItem& b) {
                       return a.arrival < b.arrival;
                     });
    std::vector<uint64_t> ids;
    for (const WorkItem& w : sorted) ids.push_back(w.id);
    return ids;
  }
  void Charge(uint64_t, int) override {}
  int size() const override { return static_cast<int>(items_.size()); }

 private:
  std::vector<WorkItem> items_;
};

inline WorkQueues FifoQueues() {
  WorkQueues queues;
  for (auto& q : queues) q = std::make_unique<FifoQueue>();
  return queues;
}

}  // namespace braid::batching::testing

#endif  // BRAID_BATCHING_TESTING_FIFO_QUEUE_H_
