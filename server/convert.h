// Between braid.v1 messages and the values below the transport: requests
// into frontend/request.h's specs (validated by frontend::RequestBuilder),
// engine values into messages. Shared by the Generate and Session calls.
// Stateless; thread-safe.
#ifndef BRAID_SERVER_CONVERT_H_
#define BRAID_SERVER_CONVERT_H_

#include "batching/request.h"
#include "batching/sampler.h"
#include "frontend/request.h"
#include "proto/braid/v1/braid.pb.h"

namespace braid::server {

// The messages as they are: nothing is checked here.
frontend::PromptSpec FromProto(const v1::Prompt& prompt);
frontend::SamplingSpec FromProto(const v1::SamplingParams& sampling);
frontend::GenerateSpec FromProto(const v1::GenerateRequest& request);
frontend::SessionOpenSpec FromProto(const v1::SessionOpen& open);

v1::FinishReason ToProto(batching::FinishReason reason);

// Fills `out` with the token's log-probability and its alternatives.
void ToProto(const batching::SampledToken& token, v1::TokenLogprob* out);

}  // namespace braid::server

#endif  // BRAID_SERVER_CONVERT_H_
