// What every spexlab-cli command (and desi_extract_spectra) shares: CLI11 parsing with
// argparse's habits, error reporting, output checks, atomic text output and the
// terminal progress bar. Each command lives in its own cmd_*.cpp.
#pragma once

#include "core/extract/engine.h"
#include "core/plan/patch_plan.h"
#include "core/psf/gauss_hermite_psf.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

namespace spex::cli {

// Parses args (without the program and command names) into app, the way Python's
// argparse would: "--opt=value", "-s0", and unambiguous prefixes of long options
// ("--bary" for "--barycentric-correction"); an ambiguous prefix, an unknown option, a
// missing or malformed value each throw InputError naming the option. Returns false
// when -h/--help was given: the help page has been printed to stdout and the command
// should return 0.
bool parseArgs(CLI::App& app, std::vector<std::string> args);

// A CLI::App for one command: the name shown in help and errors ("spexlab-cli
// extract"), options taking their last value when repeated (as argparse does).
void setupApp(CLI::App& app);

// Runs a command body, turning errors into one "<prog>: error: ..." line on stderr
// and exit code 1.
int guarded(const std::string& prog, const std::function<int()>& body);

// "a,b,c" -> numbers; throws InputError naming the option on a bad list.
std::vector<double> numberList(const std::string& text, const std::string& option);

// -w wmin,wmax[,dw] (dw 0.8 when absent). Throws InputError naming -w on bad text.
WaveGrid parseWaveOption(const std::string& text);

// --gpus 0,1 -> device numbers.
std::vector<int> parseGpus(const std::string& text);

// Fails early, before minutes of work, when an output cannot be written: its
// directory must exist and be writable, it must not be a directory or one of inputs.
void checkWritable(const std::string& path, const std::string& what,
                   const std::vector<std::string>& inputs = {});

// Writes text to path + ".tmp-PID" and renames it over path; nothing is left on error.
void writeTextAtomic(const std::string& path, const std::string& text);

// A progress bar on a terminal (stderr), nothing otherwise.
class TerminalProgress : public ProgressSink {
public:
  explicit TerminalProgress(bool enabled);
  void patchDone(int patch, int done, int total) override;

private:
  bool m_enabled;
  std::mutex m_mutex;
  std::chrono::steady_clock::time_point m_last{};
};

} // namespace spex::cli
