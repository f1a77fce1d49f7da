#include "server/convert.h"

namespace braid::server {

v1::FinishReason ToProto(batching::FinishReason reason) {
  switch (reason) {
    case batching::FinishReason::kEos:
      return v1::FINISH_REASON_EOS;
    case batching::FinishReason::kLength:
      return v1::FINISH_REASON_LENGTH;
    case batching::FinishReason::kStop:
      return v1::FINISH_REASON_STOP;
    case batching::FinishReason::kContextFull:
      return v1::FINISH_REASON_CONTEXT_FULL;
    case batching::FinishReason::kCancelled:
      return v1::FINISH_REASON_CANCELLED;
    case batching::FinishReason::kNone:
      break;
  }
  return v1::FINISH_REASON_UNSPECIFIED;
}

void ToProto(const batching::SampledToken& token, v1::TokenLogprob* out) {
  out->set_token_id(token.token_id);
  out->set_logprob(token.logprob);
  for (const batching::TokenChoice& c : token.top) {
    v1::TopLogprob* top = out->add_top();
    top->set_token_id(c.token_id);
    top->set_logprob(c.logprob);
  }
}

}  // namespace braid::server
