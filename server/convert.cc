#include "server/convert.h"

#include <utility>

namespace braid::server {

frontend::PromptSpec FromProto(const v1::Prompt& p) {
  frontend::PromptSpec out;
  switch (p.kind_case()) {
    case v1::Prompt::kText:
      out.kind = frontend::PromptSpec::Kind::kText;
      out.text = p.text();
      break;
    case v1::Prompt::kTokens:
      out.kind = frontend::PromptSpec::Kind::kTokens;
      out.tokens.assign(p.tokens().ids().begin(), p.tokens().ids().end());
      break;
    case v1::Prompt::kChat:
      out.kind = frontend::PromptSpec::Kind::kChat;
      for (const v1::ChatMessage& m : p.chat().messages()) {
        out.messages.push_back({m.role(), m.content()});
      }
      out.add_generation_prompt = !p.chat().no_generation_prompt();
      out.continuation = p.chat().continuation();
      break;
    case v1::Prompt::KIND_NOT_SET:
      break;
  }
  if (p.has_add_special_tokens()) {
    out.add_special_tokens = p.add_special_tokens();
  }
  return out;
}

frontend::SamplingSpec FromProto(const v1::SamplingParams& p) {
  frontend::SamplingSpec s;
  s.temperature = p.temperature();
  s.top_k = p.top_k();
  s.top_p = p.top_p();
  s.min_p = p.min_p();
  s.repetition_penalty = p.repetition_penalty();
  s.frequency_penalty = p.frequency_penalty();
  s.presence_penalty = p.presence_penalty();
  if (p.has_seed()) s.seed = p.seed();
  s.logprobs = p.logprobs();
  s.top_logprobs = p.top_logprobs();
  s.stop.assign(p.stop().begin(), p.stop().end());
  s.stop_token_ids.assign(p.stop_token_ids().begin(), p.stop_token_ids().end());
  s.ignore_eos = p.ignore_eos();
  if (p.has_max_tokens()) s.max_tokens = p.max_tokens();
  s.reasoning_budget = p.reasoning_budget();
  s.hide_reasoning = p.hide_reasoning();
  return s;
}

frontend::GenerateSpec FromProto(const v1::GenerateRequest& r) {
  frontend::GenerateSpec g;
  g.request_id = r.request_id();
  g.tenant = r.tenant();
  g.priority = r.priority();
  g.tpot_objective_ms = r.tpot_objective_ms();
  g.ttft_objective_ms = r.ttft_objective_ms();
  if (r.has_prompt()) g.prompt = FromProto(r.prompt());
  g.sampling = FromProto(r.sampling());
  return g;
}

frontend::SessionOpenSpec FromProto(const v1::SessionOpen& open) {
  frontend::SessionOpenSpec o;
  o.session_id = open.session_id();
  if (open.has_prefix()) o.prefix = FromProto(open.prefix());
  for (const v1::StreamSpec& s : open.streams()) {
    frontend::StreamSpec spec;
    spec.stream_id = s.stream_id();
    spec.role = s.role();
    spec.kind = s.kind();
    spec.visibility = s.visibility();
    if (s.has_sampling()) spec.sampling = FromProto(s.sampling());
    o.streams.push_back(std::move(spec));
  }
  o.duplex_policy = open.duplex_policy();
  o.priority = open.priority();
  o.tenant = open.tenant();
  o.resume = open.resume();
  o.tpot_objective_ms = open.tpot_objective_ms();
  o.ttft_objective_ms = open.ttft_objective_ms();
  return o;
}

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
