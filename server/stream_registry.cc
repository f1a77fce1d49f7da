#include "server/stream_registry.h"

#include <utility>
#include <vector>

namespace braid::server {

uint64_t StreamRegistry::Add(std::weak_ptr<AbortableStream> stream) {
  absl::MutexLock lock(&mu_);
  const uint64_t id = next_id_++;
  streams_[id] = std::move(stream);
  return id;
}

void StreamRegistry::Remove(uint64_t id) {
  absl::MutexLock lock(&mu_);
  streams_.erase(id);
}

int StreamRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int>(streams_.size());
}

int StreamRegistry::AbortAll(const grpc::Status& status) {
  std::vector<std::shared_ptr<AbortableStream>> open;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [id, weak] : streams_) {
      if (auto stream = weak.lock()) open.push_back(std::move(stream));
    }
  }
  for (auto& stream : open) stream->Abort(status);  // outside mu_
  return static_cast<int>(open.size());
}

}  // namespace braid::server
