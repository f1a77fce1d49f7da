// Engine values -> braid.v1 messages, shared by the Generate and Session
// calls. Stateless; thread-safe.
#ifndef BRAID_SERVER_CONVERT_H_
#define BRAID_SERVER_CONVERT_H_

#include "batching/request.h"
#include "batching/sampler.h"
#include "proto/braid/v1/braid.pb.h"

namespace braid::server {

v1::FinishReason ToProto(batching::FinishReason reason);

// Fills `out` with the token's log-probability and its alternatives.
void ToProto(const batching::SampledToken& token, v1::TokenLogprob* out);

}  // namespace braid::server

#endif  // BRAID_SERVER_CONVERT_H_
