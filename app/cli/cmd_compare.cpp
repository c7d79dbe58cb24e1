// `spexlab-cli compare`: agreement statistics of two frames.
#include "commands.h"

#include "cli_common.h"
#include "core/errors.h"
#include "core/extract/compare.h"
#include "core/io/frame_io.h"

#include <cstdio>

namespace spex::cli {

int cmdCompare(const std::vector<std::string>& args) {
  CLI::App app("Agreement statistics of two frames: |fa - fb| / sigma per bin, ivar, resolution, mask.",
               "spexlab-cli compare");
  setupApp(app);
  std::vector<std::string> files;
  double maxSigma = 0;
  bool json = false, overlap = false;
  app.add_option("frames", files, "two frame files: a.fits b.fits");
  auto* maxOpt = app.add_option("--max-sigma", maxSigma, "exit 3 if any bin differs by more than X sigma (X >= 0)");
  app.add_flag("--json", json, "print the statistics as JSON");
  app.add_flag("--overlap", overlap,
               "frames of other fiber ranges or wavelength ranges (same bin width, whole bins apart): compare "
               "the spectra and wavelengths both hold, and say which");
  if (!parseArgs(app, args)) return 0;
  if (files.size() != 2) throw InputError("compare needs two frame files: a.fits b.fits");
  if (maxOpt->count() && !(maxSigma >= 0))
    throw InputError("--max-sigma must be >= 0, got " + app.get_option("--max-sigma")->as<std::string>());
  ExtractionResult a = readFrame(files[0]);
  ExtractionResult b = readFrame(files[1]);
  std::string note;
  if (overlap) {
    // The same rule as the workbench's Compare results dock (core findOverlap).
    const FrameOverlap o = findOverlap(a, b);
    if (!o.whole) {
      a = cropToOverlap(a, o, true);
      b = cropToOverlap(b, o, false);
      note = o.description;
    }
  }
  const FrameComparison c = compareFrames(a, b);
  if (json)
    std::printf("%s\n", c.toJson().c_str());
  else
    std::printf("%s vs %s\n%s%s", files[0].c_str(), files[1].c_str(), note.empty() ? "" : (note + "\n").c_str(),
                c.toText().c_str());
  if (maxOpt->count() && c.maxPull > maxSigma) return 3;
  return 0;
}

} // namespace spex::cli
