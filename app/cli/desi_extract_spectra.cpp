// desi_extract_spectra: desispec's extraction command line, run by SpexLab. The same
// program as `spexlab-cli extract`, so desi_proc's line runs unchanged.
#include "cli_common.h"
#include "commands.h"
#include "process_exit.h"

#include <string>
#include <vector>

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const std::string prog = "desi_extract_spectra";
  const int rc = spex::cli::guarded(prog, [&] { return spex::cli::cmdExtract(args, prog); });
  if (spex::cli::detachedExitRequested()) spex::cli::exitLeavingTeardown(rc);
  return rc;
}
