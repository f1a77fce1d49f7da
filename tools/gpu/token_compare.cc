#include "tools/gpu/token_compare.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace braid::gpu_check {

Parting Compare(const std::vector<Token>& want, const std::vector<Token>& got,
                double tie_nats) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  Parting p;
  const size_t n = std::min(want.size(), got.size());
  for (size_t i = 0; i < n; ++i) {
    if (want[i].id == got[i].id) {
      ++p.equal_tokens;
      p.max_logprob_diff = std::max<double>(
          p.max_logprob_diff, std::abs(want[i].logprob - got[i].logprob));
      continue;
    }
    p.position = static_cast<int>(i);
    p.cpu_gap_nats = got[i].id == want[i].second_id
                         ? want[i].first_logprob - want[i].second_logprob
                         : kInf;
    p.tolerated = p.cpu_gap_nats <= tie_nats;
    return p;
  }
  if (want.size() != got.size()) {
    p.position = static_cast<int>(n);
    p.cpu_gap_nats = kInf;
    p.tolerated = false;
  }
  return p;
}

std::vector<int32_t> Ids(const std::vector<Token>& tokens) {
  std::vector<int32_t> ids;
  for (const Token& t : tokens) ids.push_back(t.id);
  return ids;
}

}  // namespace braid::gpu_check
