// `braid chat`: an interactive conversation over one braid.v1 Session, so
// the KV context stays in the daemon between turns and each reply starts
// at once. Each line typed is a user turn: the first, rendered with the
// model's chat template (Tokenize), opens the session; the next ones
// continue it (ChatMessages.continuation). Reasoning is shown dimmed, or
// hidden. Ctrl-C interrupts the reply being written and keeps the session; at
// the prompt, Ctrl-C or end of input (Ctrl-D) ends the chat. With stream_input,
// lines are sent while the model writes (the Session API's full duplex: the
// reply goes on after them).
#ifndef BRAID_TOOLS_CLI_CHAT_H_
#define BRAID_TOOLS_CLI_CHAT_H_

#include <memory>
#include <string>

#include "proto/braid/v1/braid.grpc.pb.h"

namespace braid::cli {

struct ChatOptions {
  std::string system;  // a system message for the first turn
  v1::SamplingParams sampling;
  bool hide_reasoning = false;
  bool stream_input = false;
  bool color = true;  // dim reasoning (when stdout is a terminal)
};

// Runs the chat until the input ends, its calls carrying the bearer token
// `token` (none when empty); 0, or 1 on an RPC error.
int RunChat(v1::Braid::Stub& stub, const std::string& token,
            const ChatOptions& options);

}  // namespace braid::cli

#endif  // BRAID_TOOLS_CLI_CHAT_H_
