// Checks and reports of `spexlab-cli extract` kept apart from option parsing
// (docs/reliability.md): the patch size bound, and the warning and exit status for
// bins without a usable extraction.
#pragma once

#include "core/extract/engine.h"

#include <string>

namespace spex::cli {

// Exit status of an extraction that wrote its frame but has bins flagged NODATA
// (failed patches, or results a float32 frame cannot hold).
constexpr int kExitUnusableBins = 4;

// nwavestep bounded by the grid (a patch wider than the grid only pads it: reduced
// to the grid's bin count, never below the default) and by memory (throws InputError
// when one patch's dense solve would need more than half the machine's memory).
// Returns the value to use; `note` says what was changed, else stays empty.
int boundNwavestep(int nwavestep, const ExtractionRequest& request, std::string& note);

// Prints the warning for NODATA bins (none: nothing) and returns the exit status:
// 0, or kExitUnusableBins when any bin of the frame has no usable extraction.
int reportUnusableBins(const ExtractionResult& result, const char* command);

} // namespace spex::cli
