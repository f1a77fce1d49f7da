#include "tools/cli/chat.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace braid::cli {
namespace {

std::atomic<bool> g_interrupt{false};
// The handler also writes a byte here, so a Ctrl-C that lands after the last
// check of g_interrupt and before the wait for input still wakes that wait
// (and it does whichever thread the signal is delivered to).
int g_wake[2] = {-1, -1};

void OnSigint(int) {
  g_interrupt = true;
  const char c = 1;
  [[maybe_unused]] const ssize_t n = write(g_wake[1], &c, 1);
}

// SIGINT, with a non-blocking wake-up pipe for ReadLine.
bool CatchSigint() {
  if (pipe2(g_wake, O_NONBLOCK | O_CLOEXEC) != 0) return false;
  struct sigaction sa = {};
  sa.sa_handler = OnSigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  return sigaction(SIGINT, &sa, nullptr) == 0;
}

// Whether a Ctrl-C came since the last call; empties the wake-up pipe.
bool TakeInterrupt() {
  char buf[64];
  while (read(g_wake[0], buf, sizeof(buf)) > 0) {
  }
  return g_interrupt.exchange(false);
}

enum class LineResult { kLine, kEof, kInterrupted };

// One line of stdin (without its newline), byte by byte, waiting on stdin and
// the wake-up pipe together so that Ctrl-C interrupts the wait.
LineResult ReadLine(std::string* line) {
  line->clear();
  for (;;) {
    pollfd fds[2] = {{STDIN_FILENO, POLLIN, 0}, {g_wake[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return LineResult::kEof;
    }
    if (fds[1].revents != 0 && TakeInterrupt()) {
      return LineResult::kInterrupted;
    }
    if (fds[0].revents == 0) continue;
    char c;
    const ssize_t n = read(STDIN_FILENO, &c, 1);
    if (n == 1) {
      if (c == '\n') return LineResult::kLine;
      line->push_back(c);
      continue;
    }
    if (n == 0) return line->empty() ? LineResult::kEof : LineResult::kLine;
    if (errno == EINTR || errno == EAGAIN) continue;
    return LineResult::kEof;
  }
}

class Chat {
 public:
  Chat(v1::Braid::Stub& stub, std::string token, const ChatOptions& options)
      : stub_(stub),
        token_(std::move(token)),
        options_(options),
        dim_(options.color && isatty(STDOUT_FILENO)) {}

  int Run();

 private:
  // Opens the session with the first turn: its rendering (through the
  // Tokenize RPC) but the last token is the session's prefix, the last
  // token the input the reply starts after.
  bool Open(const std::string& text);
  void Send(const std::string& text);
  void ReadEvents();
  void Print(const std::string& text, bool reasoning)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits for the running reply to end, interrupting it on Ctrl-C.
  void WaitForReply();
  bool replying() {
    absl::MutexLock lock(&mu_);
    return replying_;
  }

  // A call's context, with the bearer token if there is one.
  void Authorize(grpc::ClientContext* ctx) const {
    if (!token_.empty()) ctx->AddMetadata("authorization", "Bearer " + token_);
  }

  v1::Braid::Stub& stub_;
  const std::string token_;
  grpc::ClientContext ctx_;  // the Session call's
  const ChatOptions options_;
  const bool dim_;
  std::unique_ptr<
      grpc::ClientReaderWriter<v1::SessionRequest, v1::SessionEvent>>
      stream_;
  int turns_ = 0;
  int next_input_ = 1;

  absl::Mutex mu_;  // the fields below, and stdout
  bool replying_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;  // the server ended the stream
  bool in_reasoning_ ABSL_GUARDED_BY(mu_) = false;
  // How the last reply ended: with the end token (in the context) or cut.
  bool last_ended_with_eos_ ABSL_GUARDED_BY(mu_) = false;
};

bool Chat::Open(const std::string& text) {
  v1::TokenizeRequest tokenize;
  v1::ChatMessages* chat = tokenize.mutable_prompt()->mutable_chat();
  if (!options_.system.empty()) {
    v1::ChatMessage* m = chat->add_messages();
    m->set_role("system");
    m->set_content(options_.system);
  }
  v1::ChatMessage* m = chat->add_messages();
  m->set_role("user");
  m->set_content(text);
  v1::TokenizeResponse ids;
  grpc::ClientContext tctx;
  Authorize(&tctx);
  grpc::Status status = stub_.Tokenize(&tctx, tokenize, &ids);
  if (!status.ok() || ids.token_ids_size() < 2) {
    std::fprintf(stderr, "braid: error %d: %s\n",
                 static_cast<int>(status.error_code()),
                 status.ok() ? "the first turn renders to under 2 tokens"
                             : status.error_message().c_str());
    return false;
  }
  Authorize(&ctx_);
  stream_ = stub_.Session(&ctx_);
  v1::SessionRequest open;
  v1::SessionOpen* o = open.mutable_open();
  for (int i = 0; i + 1 < ids.token_ids_size(); ++i) {
    o->mutable_prefix()->mutable_tokens()->add_ids(ids.token_ids(i));
  }
  v1::StreamSpec* user = o->add_streams();
  user->set_stream_id("user");
  user->set_role(v1::STREAM_ROLE_USER);
  user->set_kind(v1::STREAM_KIND_INPUT);
  v1::StreamSpec* out = o->add_streams();
  out->set_stream_id("out");
  out->set_role(v1::STREAM_ROLE_OUTPUT);
  out->set_kind(v1::STREAM_KIND_OUTPUT);
  *out->mutable_sampling() = options_.sampling;
  stream_->Write(open);
  v1::SessionRequest first;
  v1::SessionAppend* a = first.mutable_append();
  a->set_input_id(absl::StrCat("in", next_input_++));
  a->set_stream_id("user");
  a->mutable_input()->mutable_tokens()->add_ids(
      ids.token_ids(ids.token_ids_size() - 1));
  a->add_generate_on("out");
  {
    absl::MutexLock lock(&mu_);
    replying_ = true;
  }
  ++turns_;
  stream_->Write(first);
  return true;
}

// A user turn after the first: it continues the conversation. While a reply is
// running (stream_input) the text lands mid-reply and the reply goes on after
// it.
void Chat::Send(const std::string& text) {
  v1::SessionRequest req;
  v1::SessionAppend* a = req.mutable_append();
  a->set_input_id(absl::StrCat("in", next_input_++));
  a->set_stream_id("user");
  v1::ChatMessages* chat = a->mutable_input()->mutable_chat();
  const bool running = replying();
  v1::ChatMessage* m = chat->add_messages();
  m->set_role("user");
  m->set_content(text);
  {
    absl::MutexLock lock(&mu_);
    chat->set_continuation(!running && last_ended_with_eos_
                               ? v1::CHAT_CONTINUATION_AFTER_END
                               : v1::CHAT_CONTINUATION_AFTER_CUT);
  }
  if (!running) {
    a->add_generate_on("out");
    absl::MutexLock lock(&mu_);
    replying_ = true;
  }
  ++turns_;
  stream_->Write(req);
}

void Chat::Print(const std::string& text, bool reasoning) {
  if (reasoning && options_.hide_reasoning) return;
  if (dim_ && reasoning != in_reasoning_) {
    std::fputs(reasoning ? "\x1b[2m" : "\x1b[0m", stdout);
  }
  in_reasoning_ = reasoning;
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fflush(stdout);
}

void Chat::ReadEvents() {
  v1::SessionEvent e;
  while (stream_->Read(&e)) {
    absl::MutexLock lock(&mu_);
    if (e.has_tokens()) {
      Print(e.tokens().text(),
            e.tokens().stream() == v1::STREAM_KIND_REASONING);
    } else if (e.has_turn_end()) {
      Print("", false);
      if (dim_ && in_reasoning_) std::fputs("\x1b[0m", stdout);
      in_reasoning_ = false;
      const v1::FinishReason r = e.turn_end().info().finish_reason();
      last_ended_with_eos_ = r == v1::FINISH_REASON_EOS;
      if (r == v1::FINISH_REASON_CANCELLED) {
        std::fputs(" [interrupted]", stdout);
      }
      // With stream input the main thread is already reading the next
      // line: the prompt comes from here.
      std::fputs(options_.stream_input ? "\n> " : "\n", stdout);
      std::fflush(stdout);
      replying_ = false;
    } else if (e.has_error()) {
      std::fprintf(stderr, "braid: error %d: %s\n", e.error().code(),
                   e.error().message().c_str());
      replying_ = false;
    }
  }
  absl::MutexLock lock(&mu_);
  closed_ = true;
  replying_ = false;
}

void Chat::WaitForReply() {
  absl::MutexLock lock(&mu_);
  while (replying_ && !closed_) {
    mu_.AwaitWithTimeout(absl::Condition(
                             +[](bool* r) { return !*r; }, &replying_),
                         absl::Milliseconds(20));
    if (TakeInterrupt() && replying_) {
      v1::SessionRequest req;
      req.set_interrupt_stream_id("out");
      mu_.Unlock();
      stream_->Write(req);
      mu_.Lock();
    }
  }
}

int Chat::Run() {
  if (!CatchSigint()) {
    std::perror("braid: Ctrl-C handling");
    return 1;
  }
  std::thread reader;
  std::string line;
  for (;;) {
    {
      absl::MutexLock lock(&mu_);
      if (closed_) break;
      if (!replying_ && (turns_ == 0 || !options_.stream_input)) {
        std::fputs("> ", stdout);
        std::fflush(stdout);
      }
    }
    const LineResult r = ReadLine(&line);
    if (r == LineResult::kInterrupted) {
      if (replying()) {  // stream_input: Ctrl-C while the model writes
        v1::SessionRequest req;
        req.set_interrupt_stream_id("out");
        stream_->Write(req);
        continue;
      }
      std::fputs("\n", stdout);
      break;
    }
    if (r == LineResult::kEof) break;
    if (line == "/quit" || line == "/exit") break;
    if (line.empty()) continue;
    if (turns_ == 0) {
      if (!Open(line)) return 1;
      reader = std::thread([this] { ReadEvents(); });
    } else {
      Send(line);
    }
    if (!options_.stream_input) WaitForReply();
  }
  if (turns_ == 0) return 0;  // nothing was said: no session
  if (replying()) WaitForReply();
  v1::SessionRequest close;
  close.mutable_close();
  stream_->Write(close);
  stream_->WritesDone();
  reader.join();
  grpc::Status status = stream_->Finish();
  if (!status.ok()) {
    std::fprintf(stderr, "braid: error %d: %s\n",
                 static_cast<int>(status.error_code()),
                 status.error_message().c_str());
    return 1;
  }
  return 0;
}

}  // namespace

int RunChat(v1::Braid::Stub& stub, const std::string& token,
            const ChatOptions& options) {
  return Chat(stub, token, options).Run();
}

}  // namespace braid::cli
