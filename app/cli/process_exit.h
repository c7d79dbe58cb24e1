// How a command-line process ends after a CUDA extraction. Its outputs are written,
// synced and renamed, and the engine's device memory and contexts released, but the
// process's end still costs ~0.1 s in the kernel on the GPU machine (docs/benchmarks.md,
// "Cold process" and its fifth round): its address space (the driver's mappings,
// the libraries, the host arrays) and the driver's files are torn down before the
// parent (the shell) learns of the exit. A command may ask for that teardown to be
// left to a helper process sharing the address space and the file table: the
// program's own process then exits at once with its code, and the helper, the last
// user of both, frees them in the background (the way the mold linker ends).
#pragma once

namespace spex::cli {

// Called by a command once its outputs are complete (cmd_extract.cpp): the program's
// main then ends through exitLeavingTeardown, where byDefault (a CUDA extraction) or
// SPEXLAB_DETACHED_EXIT=1 in the environment (any engine; the tests use it) says so.
// SPEXLAB_DETACHED_EXIT=0 turns it off (the process ends as any other).
void requestDetachedExit(bool byDefault);
bool detachedExitRequested();

// Flushes stdio, starts the helper (which waits until this process has exited, closes
// stdin, stdout and stderr, then exits itself, freeing what is left) and ends this
// process with `code` at once (_exit: no static destructors). Linux only; where the
// helper cannot be started it simply calls _exit(code).
[[noreturn]] void exitLeavingTeardown(int code);

} // namespace spex::cli
