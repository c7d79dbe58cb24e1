// The kernel profile's table (extract/bench --profile-kernels): per phase, its device
// time and the kernels and copies that ran in it, with count, total, mean and share of
// the phase; then how the activities were fitted to the phases and how busy each device
// was (docs/profiling.md).
#pragma once

#include "core/profile/profile.h"

#include <string>

namespace spex::cli {

// maxPerPhase: kernel rows shown per phase (the rest summed into one "other" row).
std::string kernelTable(const Profile& p, int maxPerPhase = 6);

// One line per device: how busy it was over the whole profile (Profile::deviceOccupancy),
// ending the kernel table.
std::string occupancyLines(const Profile& p);

} // namespace spex::cli
