// Per-fiber quality scores of a raw frame: the SCORES HDU desispec's
// desi_extract_spectra appends with compute_and_append_frame_scores(frame, suffix="RAW")
// (desispec.specscore). The frame writer turns FrameScores into that table: one
// float64 ('D') column per name, the comment on the column's TTYPE card.
#pragma once

#include "../array.h"

#include <cstdint>
#include <string>
#include <vector>

namespace spex {

struct FrameScores {
  std::vector<std::string> names;           // column names, in desispec's order
  std::vector<std::vector<double>> columns; // columns[k][fiber], one value per fiber
  std::vector<std::string> comments;        // TTYPE comment of each column
};

// desispec's tophat of a camera arm from the mean of the grid: mean <= 5800 A 'b',
// mean >= 7600 A 'z', else 'r'; [lo, hi) in Angstrom.
struct ScoreBand {
  char band; // 'b', 'r' or 'z'
  double lo, hi;
};
ScoreBand scoreBandOf(const std::vector<double>& wave);

// The RAW scores of a frame whose flux is counts per bin (desispec's default
// flux_per_angstrom=False), on the written grid `wave`: over the bins of the band's
// tophat [lo, hi), with dwave = numpy.gradient(wave) and ivar < 0 taken as 0,
//   SUM_RAW_COUNT_X    = sum(flux)
//   MEDIAN_RAW_COUNT_X = median(flux / dwave)
//   MEDIAN_RAW_SNR_X   = median(sqrt(ivar) * flux / sqrt(dwave))      (X = B, R or Z).
// No other bin selection: desispec ignores the frame MASK and zero ivar here, so `mask`
// is accepted (and its shape checked) but does not change the result. A NaN among the
// bins gives NaN, as numpy's sum and median do. Throws InputError when shapes differ,
// the grid has fewer than 2 bins, or no bin falls in the tophat.
FrameScores computeRawScores(const Array2D<double>& flux, const Array2D<double>& ivar,
                             const std::vector<double>& wave, const Array2D<uint32_t>* mask);

} // namespace spex
