// SIGINT and SIGTERM for spexlab-cli (docs/reliability.md "Signals"). While an
// extraction runs, a signal cancels it through the engine's CancelToken (the same path
// the workbench's Cancel button takes); the command then prints one line and exits
// 128 + signal without writing. Outside an extraction (reading, writing) the handler
// deletes the live output temporaries, prints one line and exits at once. A second
// signal always exits at once.
#pragma once

#include "core/extract/engine.h"

namespace spex::cli {

class SignalGuard {
public:
  SignalGuard();  // installs the handlers
  ~SignalGuard(); // restores the previous ones
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;

  // While an Extracting scope lives, a signal cancels `token` instead of exiting.
  class Extracting {
  public:
    explicit Extracting(CancelToken& token);
    ~Extracting();
  };

  // The signal received so far (SIGINT, SIGTERM), or 0.
  static int received();
  static const char* name(int sig); // "SIGINT", "SIGTERM"
};

} // namespace spex::cli
