#ifndef BRAID_FRONTEND_REQUEST_BUILDER_H_
#define BRAID_FRONTEND_REQUEST_BUILDER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "batching/request.h"
#include "frontend/request.h"
#include "model/tokenizer/chat_template.h"
#include "model/tokenizer/tokenizer.h"

namespace braid::frontend {

// A request's or session's TPOT objective (`field`, in milliseconds; 0 =
// the daemon's) as the engine takes it (batching::SessionOptions::
// tpot_objective), or INVALID_ARGUMENT naming `field` outside [0, 60000].
absl::StatusOr<absl::Duration> TpotObjective(int64_t ms,
                                             absl::string_view field);
// Its TTFT objective likewise (batching::SessionOptions::ttft_objective),
// within [0, 3600000].
absl::StatusOr<absl::Duration> TtftObjective(int64_t ms,
                                             absl::string_view field);

// Validates requests (frontend/request.h, whatever front end parsed them)
// and turns them into engine requests. Every rejection is INVALID_ARGUMENT
// with a message that names the field (the API's path, e.g.
// "sampling.top_p") and the rule. Immutable after construction;
// thread-safe.
class RequestBuilder {
 public:
  struct Limits {
    int context_length = 0;  // tokens the daemon serves per sequence
    int max_stop_strings = 16;
    int max_stop_bytes = 256;
    int max_top_logprobs = 20;
  };

  // `chat_template` may be null (the model's template was not recognised;
  // chat prompts are then rejected).
  RequestBuilder(const model::Tokenizer* tokenizer,
                 const model::ChatTemplate* chat_template, Limits limits);

  absl::StatusOr<batching::GenerationRequest> BuildGenerate(
      const GenerateSpec& request) const;

  // Text or chat prompt -> token ids (token-id prompts are rejected).
  // `starts_context`: the prompt begins a context (a Generate prompt, a
  // session's prefix), so a text prompt that leaves add_special_tokens
  // unset gets the model's special tokens (v1::Prompt).
  absl::StatusOr<std::vector<int32_t>> Tokenize(
      const PromptSpec& prompt, bool starts_context = false) const;

  // Checks each id is in the vocabulary.
  absl::Status CheckTokenIds(absl::Span<const int32_t> ids,
                             absl::string_view field) const;

  // The pieces of BuildGenerate, shared with the Session RPC (a session's
  // prefix and appended input are prompts; each output stream's sampling is
  // checked like a Generate request's, against `prompt_tokens` of context).
  // Any prompt kind -> token ids: non-empty and shorter than the context.
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const PromptSpec& prompt,
                                                    bool starts_context) const;
  // Fills out->sampling, stop, stop_token_ids, ignore_eos, max_tokens and
  // reasoning.
  absl::Status FillSampling(const SamplingSpec& params, int prompt_tokens,
                            batching::GenerationRequest* out) const;

 private:
  // FillSampling's parts: the sampler's options; stop strings and ids;
  // max_tokens (inside the context) and the reasoning options.
  absl::Status FillSamplerOptions(const SamplingSpec& p,
                                  batching::SamplingOptions* s) const;
  absl::Status FillStops(const SamplingSpec& p,
                         batching::GenerationRequest* out) const;
  absl::Status FillLength(const SamplingSpec& p, int prompt_tokens,
                          batching::GenerationRequest* out) const;
  // A chat prompt that continues a session's conversation
  // (PromptSpec::continuation).
  absl::StatusOr<std::vector<int32_t>> ChatContinuation(
      absl::Span<const model::ChatMessage> messages,
      const PromptSpec& prompt) const;

  const model::Tokenizer* tokenizer_;
  const model::ChatTemplate* chat_template_;
  Limits limits_;
};

// True when `s` is well-formed UTF-8 (no overlongs, surrogates or values past
// U+10FFFF).
bool IsValidUtf8(absl::string_view s);

// Replaces every ill-formed sequence with U+FFFD, so the result can travel in
// a proto string field.
std::string SanitizeUtf8(absl::string_view s);

}  // namespace braid::frontend

#endif  // BRAID_FRONTEND_REQUEST_BUILDER_H_
