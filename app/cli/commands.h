// The spexlab-cli subcommands, one file each (cmd_<name>.cpp). Each takes its
// arguments (after the subcommand name) and returns the process exit code; errors are
// thrown as SpexError and reported by guarded() (cli_common.h).
#pragma once

#include <string>
#include <vector>

namespace spex::cli {

// `prog` is the name used in help and messages: "spexlab-cli extract", or
// "desi_extract_spectra" for the drop-in executable (same options).
int cmdExtract(const std::vector<std::string>& args,
               const std::string& prog = "spexlab-cli extract"); // cmd_extract.cpp
int cmdSimulate(const std::vector<std::string>& args);           // cmd_simulate.cpp
int cmdBench(const std::vector<std::string>& args);              // cmd_bench.cpp
int cmdCompare(const std::vector<std::string>& args);            // cmd_compare.cpp
int cmdSweep(const std::vector<std::string>& args);              // cmd_sweep.cpp
int cmdBatch(const std::vector<std::string>& args);              // cmd_batch.cpp

} // namespace spex::cli
