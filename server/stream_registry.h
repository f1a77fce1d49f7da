// The open streaming calls (Generate and Session), so that a drain can wait
// for them and end the ones left when the grace period is over.
#ifndef BRAID_SERVER_STREAM_REGISTRY_H_
#define BRAID_SERVER_STREAM_REGISTRY_H_

#include <cstdint>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"

namespace braid::server {

// An open stream that can be ended from outside (drain).
class AbortableStream {
 public:
  virtual ~AbortableStream() = default;
  // Finishes the call with `status` (unless it already finished) and
  // cancels its engine work.
  virtual void Abort(const grpc::Status& status) = 0;
};

// The open Generate streams, so that a drain can wait for them and end the
// ones left when the grace period is over. Thread-safe.
class StreamRegistry {
 public:
  uint64_t Add(std::weak_ptr<AbortableStream> stream);
  void Remove(uint64_t id);
  int size() const;
  // Aborts every open stream with `status`; returns how many.
  int AbortAll(const grpc::Status& status);

 private:
  mutable absl::Mutex mu_;
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint64_t, std::weak_ptr<AbortableStream>> streams_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace braid::server

#endif  // BRAID_SERVER_STREAM_REGISTRY_H_
