#include "signals.h"

#include "core/io/fits_file.h"

#include <atomic>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace spex::cli {

namespace {

std::atomic<int> g_signal{0};
std::atomic<CancelToken*> g_token{nullptr};
struct sigaction g_oldInt, g_oldTerm;

void writeStderr(const char* s) {
  ssize_t r = ::write(2, s, std::strlen(s));
  (void)r;
}

// Async-signal-safe only: atomics, unlink (removeLiveTemporaries), write, _exit.
void onSignal(int sig) {
  const int previous = g_signal.exchange(sig);
  CancelToken* token = g_token.load();
  if (token && previous == 0) {
    token->cancel(); // the extraction stops at the next patch boundary
    return;
  }
  removeLiveTemporaries();
  writeStderr(sig == SIGINT ? "spexlab-cli: interrupted (SIGINT); temporary files removed, no output written\n"
                            : "spexlab-cli: terminated (SIGTERM); temporary files removed, no output written\n");
  ::_exit(128 + sig);
}

} // namespace

SignalGuard::SignalGuard() {
  struct sigaction sa {};
  sa.sa_handler = onSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;
  ::sigaction(SIGINT, &sa, &g_oldInt);
  ::sigaction(SIGTERM, &sa, &g_oldTerm);
}

SignalGuard::~SignalGuard() {
  ::sigaction(SIGINT, &g_oldInt, nullptr);
  ::sigaction(SIGTERM, &g_oldTerm, nullptr);
}

SignalGuard::Extracting::Extracting(CancelToken& token) {
  g_token.store(&token);
}

SignalGuard::Extracting::~Extracting() {
  g_token.store(nullptr);
}

int SignalGuard::received() {
  return g_signal.load();
}

const char* SignalGuard::name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "signal";
}

} // namespace spex::cli
