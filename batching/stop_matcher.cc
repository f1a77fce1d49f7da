#include "batching/stop_matcher.h"

#include <algorithm>

namespace braid::batching {

StopMatcher::StopMatcher(std::vector<std::string> stops)
    : stops_(std::move(stops)) {}

size_t StopMatcher::HoldBackLength() const {
  size_t hold = 0;
  for (const std::string& stop : stops_) {
    const size_t max_len = std::min(stop.size() - 1, pending_.size());
    for (size_t len = max_len; len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) ==
          std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  return hold;
}

StopMatcher::Result StopMatcher::Push(std::string_view text) {
  Result result;
  pending_.append(text);
  if (stops_.empty()) {
    result.text.swap(pending_);
    return result;
  }
  // Earliest match wins; among matches at one place, the longest.
  size_t best = std::string::npos;
  for (const std::string& stop : stops_) {
    const size_t at = pending_.find(stop);
    if (at == std::string::npos) continue;
    if (at < best || (at == best && stop.size() > result.matched.size())) {
      best = at;
      result.matched = stop;
    }
  }
  if (best != std::string::npos) {
    result.stopped = true;
    result.text = pending_.substr(0, best);
    pending_.clear();
    return result;
  }
  const size_t emit = pending_.size() - HoldBackLength();
  result.text = pending_.substr(0, emit);
  pending_.erase(0, emit);
  return result;
}

std::string StopMatcher::Flush() {
  std::string out;
  out.swap(pending_);
  return out;
}

}  // namespace braid::batching
