#ifndef BRAID_BATCHING_STOP_MATCHER_H_
#define BRAID_BATCHING_STOP_MATCHER_H_

#include <string>
#include <string_view>
#include <vector>

namespace braid::batching {

// Finds stop strings in streamed text, across chunk (token) boundaries.
//
// Text is pushed as it is decoded. The matcher releases text that can no
// longer be part of a stop string and holds back the longest tail that is a
// proper prefix of some stop string, so a client never sees the start of a
// stop string that later completes. One per request; not thread-safe.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  struct Result {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; `text` ends before it
    std::string matched;   // the stop string that matched
  };

  Result Push(std::string_view text);

  // Releases whatever is held back (call at the end of generation).
  std::string Flush();

 private:
  size_t HoldBackLength() const;

  std::vector<std::string> stops_;
  std::string pending_;
};

}  // namespace braid::batching

#endif  // BRAID_BATCHING_STOP_MATCHER_H_
