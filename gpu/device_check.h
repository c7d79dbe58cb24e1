// Host wrappers that run the device PSF code on given inputs, so the tests can
// compare it value by value with the C++ evaluation (STYLE.md: the Legendre and
// Hermite evaluations exist once per language and are tested against each other).
#pragma once

#include "core/plan/patch_plan.h"
#include "core/psf/gauss_hermite_psf.h"

#include <vector>

namespace spex::gpu {

// sum_k coeff[k] P_k(u) for every u.
std::vector<double> deviceLegendreSums(const std::vector<double>& coeff,
                                       const std::vector<double>& u);

// gaussHermiteBasis(deg, hsize, d[i], sigma[i]) for every i, concatenated:
// (deg + 1) * (2 hsize + 1) values each.
std::vector<double> deviceGaussHermiteBasis(int deg, int hsize, const std::vector<double>& d,
                                            const std::vector<double>& sigma);

// psf.spot(fibers[i], waves[i]) evaluated on the device, a warp per spot (the engine's
// default spot kernel) or, with warpPerSpot false, a 128-thread block per spot.
std::vector<Spot> deviceSpots(const GaussHermitePsf& psf, const std::vector<int>& fibers,
                              const std::vector<double>& waves, bool warpPerSpot = true);

// The corner table of a plan over `range` (its f0, f1, k0, k1) on grid wave, evaluated
// by the engine's launchCornerTable: the x and y of range filled (PlanCorners).
void devicePlanCorners(const GaussHermitePsf& psf, double wmin, double dw, PlanCorners& range);
// Each patch's corner extents of a plan skeleton (core/plan makePatchSkeleton) from a
// filled corner table, by the engine's launchPatchExtents (CudaEngineOptions::planAhead).
std::vector<PatchExtents> devicePatchExtents(const PatchPlan& skeleton, const PlanCorners& corners);

} // namespace spex::gpu

namespace spex::gpu {

// Eigenvalues of `count` random SPD nb x nb matrices (B^T B + 1e-6 I, B Gaussian,
// seeded) by the engine's Jacobi kernel and by cusolverDnXsyevBatched; device times
// are the median of `repeat` runs after a warm-up.
struct BlockEighComparison {
  double jacobiSeconds = 0, cusolverSeconds = 0;
  double maxRelDiff = 0; // max |w_jacobi - w_cusolver| / max |w| over all matrices
  bool cusolverAvailable = true;
};
BlockEighComparison compareBlockEigh(int nb, int count, int repeat, unsigned seed);

} // namespace spex::gpu
