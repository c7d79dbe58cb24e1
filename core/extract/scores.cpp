// Raw frame scores (scores.h), following desispec.specscore.compute_frame_scores for a
// 1D wavelength grid and counts per bin.
#include "scores.h"

#include "../errors.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>

namespace spex {
namespace {

// numpy.median of a copy: NaN if any value is NaN; even counts average the two middle
// values.
double median(std::vector<double>& v) {
  if (v.empty()) return std::numeric_limits<double>::quiet_NaN();
  for (double x : v)
    if (std::isnan(x)) return x;
  const std::size_t n = v.size(), h = n / 2;
  std::nth_element(v.begin(), v.begin() + h, v.end());
  const double upper = v[h];
  if (n % 2) return upper;
  const double lower = *std::max_element(v.begin(), v.begin() + h);
  return (lower + upper) / 2.0;
}

// numpy.gradient with unit spacing and edge_order=1.
std::vector<double> gradient(const std::vector<double>& w) {
  const std::size_t n = w.size();
  std::vector<double> g(n);
  g[0] = w[1] - w[0];
  g[n - 1] = w[n - 1] - w[n - 2];
  for (std::size_t i = 1; i + 1 < n; ++i) g[i] = (w[i + 1] - w[i - 1]) / 2.0;
  return g;
}

std::string fmt(double x) {
  std::ostringstream s;
  s << x; // 4000, 5800, ... as Python's format of the ints in desispec's tophat table
  return s.str();
}

} // namespace

ScoreBand scoreBandOf(const std::vector<double>& wave) {
  double sum = 0;
  for (double w : wave) sum += w;
  const double mean = wave.empty() ? std::numeric_limits<double>::quiet_NaN() : sum / wave.size();
  if (mean <= 5800.0) return {'b', 4000.0, 5800.0};
  if (mean >= 7600.0) return {'z', 7600.0, 9800.0};
  return {'r', 5800.0, 7600.0};
}

FrameScores computeRawScores(const Array2D<double>& flux, const Array2D<double>& ivar,
                             const std::vector<double>& wave, const Array2D<uint32_t>* mask) {
  const int nspec = flux.rows, nwave = flux.cols;
  std::ostringstream why;
  if (ivar.rows != nspec || ivar.cols != nwave)
    why << "IVAR is " << ivar.rows << " x " << ivar.cols << ", FLUX " << nspec << " x " << nwave;
  else if (mask && (mask->rows != nspec || mask->cols != nwave))
    why << "MASK is " << mask->rows << " x " << mask->cols << ", FLUX " << nspec << " x " << nwave;
  else if (int(wave.size()) != nwave)
    why << "WAVELENGTH has " << wave.size() << " bins, FLUX " << nwave;
  else if (nwave < 2)
    why << "the wavelength grid has " << nwave << " bin(s); at least 2 are needed";
  if (!why.str().empty()) throw InputError("frame scores: " + why.str());

  const ScoreBand band = scoreBandOf(wave);
  std::vector<int> bins;
  for (int j = 0; j < nwave; ++j)
    if (wave[j] >= band.lo && wave[j] < band.hi) bins.push_back(j);
  if (bins.empty())
    throw InputError("frame scores: no wavelength of the frame (" + fmt(wave.front()) + " - " +
                     fmt(wave.back()) + " A) is in the '" + std::string(1, band.band) +
                     "' tophat [" + fmt(band.lo) + ", " + fmt(band.hi) + ") A");
  const std::vector<double> dwave = gradient(wave);

  const std::string X(1, char(std::toupper(band.band)));
  const std::string range = fmt(band.lo) + "," + fmt(band.hi) + "A";
  FrameScores s;
  s.names = {"SUM_RAW_COUNT_" + X, "MEDIAN_RAW_COUNT_" + X, "MEDIAN_RAW_SNR_" + X};
  s.comments = {"sum counts in wave. range " + range, "median counts/A in wave. range " + range,
                "median SNR/sqrt(A) in wave. range " + range};
  s.columns.assign(3, std::vector<double>(nspec));
  std::vector<double> perA(bins.size()), snr(bins.size());
  for (int i = 0; i < nspec; ++i) {
    const double* f = flux.row(i);
    const double* v = ivar.row(i);
    double sum = 0;
    for (std::size_t k = 0; k < bins.size(); ++k) {
      const int j = bins[k];
      sum += f[j];
      perA[k] = f[j] / dwave[j];
      const double w = v[j] < 0 ? v[j] * 0.0 : v[j]; // desispec: ivar[ivar < 0] *= 0
      snr[k] = std::sqrt(w) * f[j] / std::sqrt(dwave[j]);
    }
    s.columns[0][i] = sum;
    s.columns[1][i] = median(perA);
    s.columns[2][i] = median(snr);
  }
  return s;
}

} // namespace spex
