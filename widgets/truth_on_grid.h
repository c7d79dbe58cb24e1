// The simulation truth as the plot views show it beside a result (SpectrumSource,
// core/extract/spectrum_source.h, names the results themselves).
#pragma once

#include "core/extract/engine.h"
#include "core/io/frame_io.h"

#include <QVector>

namespace spex {

// Truth flux density of one fiber on the result's grid, convolved with that fiber's
// resolution matrix where the result covers it (EXTRACTION.md §7: flux is compared
// with R truth / dw). At the edges of an extracted range R's missing columns are
// taken from the nearest stored ones and meet the truth beyond the range; bins whose
// R reaches where the truth has no value are NaN. `plain` gets truth / dw unconvolved.
bool truthOnGrid(const Truth& truth, const ExtractionResult& result, int fiber,
                 QVector<double>* convolved, QVector<double>* plain);

} // namespace spex
