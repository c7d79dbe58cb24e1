// SpectrumSource: one named extraction result that the plot views show ("cpu",
// "cuda": what that engine extracted so far; "frame": an opened frame file). The
// Document hands them out (app/gui) and the spectrum and resolution views read them
// (widgets/), so the type sits below both. A result may be filled in place while a
// job runs; views re-read it on refresh.
#pragma once

#include "core/extract/engine.h"

#include <memory>
#include <string>

namespace spex {

struct SpectrumSource {
  std::string name; // "cpu", "cuda", "frame"
  std::shared_ptr<const ExtractionResult> result;
};

} // namespace spex
