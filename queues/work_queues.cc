#include "queues/work_queues.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace braid::queues {

absl::StatusOr<QueuePolicy> ParseQueuePolicy(absl::string_view name) {
  if (name == "fifo") return QueuePolicy::kFifo;
  if (name == "priority") return QueuePolicy::kPriority;
  if (name == "fair") return QueuePolicy::kFairShare;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown queue policy \"", name, "\" (fifo, priority or fair)"));
}

void PolicyQueue::Push(const batching::WorkItem& item) {
  items_[item.id] = item;
  auto [it, inserted] = tenants_.try_emplace(item.tenant);
  if (inserted) {
    // Start level with the least-served active tenant.
    int64_t least = std::numeric_limits<int64_t>::max();
    for (const auto& [name, t] : tenants_) {
      if (name != item.tenant) least = std::min(least, t.served);
    }
    it->second.served =
        least == std::numeric_limits<int64_t>::max() ? 0 : least;
  }
  ++it->second.num_items;
}

void PolicyQueue::Remove(uint64_t id) {
  auto it = items_.find(id);
  if (it == items_.end()) return;
  auto t = tenants_.find(it->second.tenant);
  if (--t->second.num_items == 0) tenants_.erase(t);
  items_.erase(it);
}

void PolicyQueue::Charge(uint64_t id, int tokens) {
  auto it = items_.find(id);
  if (it == items_.end()) return;
  tenants_[it->second.tenant].served += tokens;
}

int64_t PolicyQueue::served(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.served;
}

std::vector<uint64_t> PolicyQueue::Ordered() const {
  std::vector<const batching::WorkItem*> sorted;
  sorted.reserve(items_.size());
  for (const auto& [id, item] : items_) sorted.push_back(&item);
  auto key = [this](const batching::WorkItem& w) {
    switch (policy_) {
      case QueuePolicy::kFifo:
        return std::make_tuple(0, int64_t{0}, w.arrival);
      case QueuePolicy::kPriority:
        return std::make_tuple(-w.priority, int64_t{0}, w.arrival);
      case QueuePolicy::kFairShare:
        break;
    }
    return std::make_tuple(-w.priority, tenants_.at(w.tenant).served,
                           w.arrival);
  };
  std::sort(sorted.begin(), sorted.end(),
            [&](const batching::WorkItem* a, const batching::WorkItem* b) {
              return key(*a) < key(*b);
            });
  std::vector<uint64_t> ids;
  ids.reserve(sorted.size());
  for (const batching::WorkItem* w : sorted) ids.push_back(w->id);
  return ids;
}

batching::WorkQueues MakeWorkQueues(QueuePolicy policy) {
  batching::WorkQueues queues;
  for (auto& q : queues) q = std::make_unique<PolicyQueue>(policy);
  return queues;
}

}  // namespace braid::queues
