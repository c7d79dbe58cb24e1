// The spexlab-cli subcommands. Each takes its arguments (after the subcommand name)
// and returns the process exit code; errors are thrown as SpexError and reported by
// main.
#pragma once

#include <string>
#include <vector>

namespace spex::cli {

int cmdExtract(const std::vector<std::string>& args);
int cmdSimulate(const std::vector<std::string>& args);
int cmdBench(const std::vector<std::string>& args);
int cmdCompare(const std::vector<std::string>& args);
int cmdSweep(const std::vector<std::string>& args); // cmd_sweep.cpp
int cmdBatch(const std::vector<std::string>& args); // cmd_batch.cpp

} // namespace spex::cli
