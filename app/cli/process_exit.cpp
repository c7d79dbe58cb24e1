// exitLeavingTeardown (process_exit.h): clone(CLONE_VM | CLONE_FILES) makes a second
// process that shares this one's memory and file table, so when this process exits
// the kernel only drops its references to them; the helper, still holding both, does
// the teardown when it exits. The helper runs on a stack of its own in static memory
// and calls nothing but raw system calls (it shares the libc state of a process that
// is exiting), with every signal blocked.
#include "process_exit.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#if defined(__linux__)
#include <csignal>
#include <ctime>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace spex::cli {

namespace {

std::atomic<bool> g_requested{false};

#if defined(__linux__)
alignas(64) char g_helperStack[64 * 1024];
long g_parent = 0;

int helper(void*) {
  // Until this process's parent (the program) has exited: then it is reparented.
  for (int i = 0; i < 20000 && syscall(SYS_getppid) == g_parent; ++i) {
    struct timespec t{0, 500000}; // 0.5 ms
    syscall(SYS_nanosleep, &t, nullptr);
  }
  // Whoever reads the program's output sees its end now, not after the teardown.
  for (int fd = 0; fd < 3; ++fd) syscall(SYS_close, fd);
  syscall(SYS_exit_group, 0);
  return 0;
}
#endif

} // namespace

void requestDetachedExit(bool byDefault) {
  const char* v = std::getenv("SPEXLAB_DETACHED_EXIT");
  if (v && std::strcmp(v, "0") == 0) return;
  if (byDefault || (v && std::strcmp(v, "1") == 0)) g_requested = true;
}

bool detachedExitRequested() { return g_requested; }

void exitLeavingTeardown(int code) {
  std::fflush(nullptr);
#if defined(__linux__)
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old); // the helper inherits the mask: no handler runs in it
  g_parent = static_cast<long>(getpid());
  char* top = g_helperStack + sizeof g_helperStack;
  clone(helper, top, CLONE_VM | CLONE_FILES | SIGCHLD, nullptr);
  // A failed clone (-1) leaves the teardown to this process, as without the helper.
#endif
  _exit(code);
}

} // namespace spex::cli
