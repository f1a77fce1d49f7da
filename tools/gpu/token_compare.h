// How the GPU check's end-to-end client (e2e_client.cc) compares a CUDA
// daemon's greedy tokens with the CPU daemon's, the oracle: equal up to
// where they part, and there the CUDA's token must be the CPU's second
// choice within a tolerance of its first (a near tie, which the device's
// BF16 arithmetic may flip); nothing after a parting is compared, as the
// contexts differ from there on. Pure functions.
#ifndef BRAID_TOOLS_GPU_TOKEN_COMPARE_H_
#define BRAID_TOOLS_GPU_TOKEN_COMPARE_H_

#include <cstdint>
#include <vector>

namespace braid::gpu_check {

// One sampled token, its log-probability, and the two most likely tokens
// at its position (from the API's top_logprobs = 2).
struct Token {
  int32_t id = -1;
  float logprob = 0.0f;
  int32_t first_id = -1, second_id = -1;
  float first_logprob = 0.0f, second_logprob = 0.0f;
};

// Where `got` first parts from `want`: position -1 when they are equal.
struct Parting {
  int position = -1;
  // want's first minus second log-probability there, +inf when got's token
  // is not want's second choice (or one output is a prefix of the other).
  double cpu_gap_nats = 0.0;
  bool tolerated = true;  // cpu_gap_nats <= the tolerance
  // Before the parting: the tokens equal, and the largest difference of
  // their log-probabilities.
  int equal_tokens = 0;
  double max_logprob_diff = 0.0;
};

Parting Compare(const std::vector<Token>& want, const std::vector<Token>& got,
                double tie_nats);

std::vector<int32_t> Ids(const std::vector<Token>& tokens);

}  // namespace braid::gpu_check

#endif  // BRAID_TOOLS_GPU_TOKEN_COMPARE_H_
