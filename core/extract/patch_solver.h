// PatchSolver: the weighted least-squares extraction of one patch (EXTRACTION.md §4,
// B&S 2010 eqs 4-19) on the CPU. One solver per worker thread; it owns its scratch
// buffers so a frame's thousands of patches allocate nothing after the first.
#pragma once

#include "../plan/patch_plan.h"
#include "../profile/profile.h"
#include "../psf/gauss_hermite_psf.h"
#include "banded_solver.h"
#include "spot_cache.h"
#include "sym_eigen.h"

#include <vector>

namespace spex {

struct Image;

// How the normal equations are factored and the covariance blocks formed: Banded uses
// the block band of A^T W A (banded_solver.h) where the spot boxes give one narrower
// than the patch, Dense factors and inverts the whole matrix, Auto takes whichever
// needs fewer multiply-adds for the patch at hand.
enum class NormalSolver { Auto, Dense, Banded };

struct PatchSolveOptions {
  double psferr = 0.01;
  double regularize = 0.0;
  Decorrelation mode = Decorrelation::Signal;
  int ndiag = 5;           // resolution half-width (HSIZEY)
  bool model = false;      // build the model tile of the kept bins
  NormalSolver solver = NormalSolver::Auto;
  EigenVectors eigenVectors = EigenVectors::Twisted; // how SymEigen::compute4 finds them
};

// Results over the padded unknowns (nfiberPad x nwavePad, fiber-major), in per-bin
// units (photons); the engine keeps the core and converts to per Angstrom. In signal
// mode flux, ivar and resolution are formed for the kept fibers only (zero for the
// padding fibers, whose results the engine discards).
struct PatchSolution {
  int nfib = 0, nwave = 0, ndiag = 0;
  std::vector<double> f;         // deconvolved flux, C^-1 f = y
  std::vector<double> flux;      // R f
  std::vector<double> ivar;      // s^2
  std::vector<double> pixmask;   // pixmask_fraction
  std::vector<double> chi2pix;
  std::vector<double> resolution; // [nfib][2 ndiag + 1][nwave] dia layout
  std::vector<double> model;     // box-sized [height][width] model of the kept bins
  double chi2 = 0;               // mean chi^2 per used pixel
  int npixUsed = 0;
  bool regularized = false;
  bool failed = false;
  bool banded = false;           // solved on the block band (see NormalSolver)
  int coupling = 0;              // fibers at most this far apart share pixels
};

class PatchSolver {
public:
  // Solves patch p of plan on image through psf. Never throws for numerical
  // trouble: a failed Cholesky is retried with regularize = 1e-4 (flag
  // `regularized`), and a second failure zeroes the patch (flag `failed`).
  // With a cache, spots come from it (computed there on first use; same values).
  void solve(const Patch& p, const PatchPlan& plan, const Image& image, const GaussHermitePsf& psf,
             const PatchSolveOptions& opt, PatchSolution& out, ProfileRecorder* rec = nullptr,
             SpotCache* cache = nullptr);

  // solve() in two halves, for several patches whose fiber blocks' eigenproblems are
  // solved together (four per vector, SymEigen::compute4): begin() does everything but
  // those eigenproblems and what follows from them in signal mode (flux, ivar and
  // resolution of the kept fibers), queueing the blocks; finish() solves every queued
  // block in groups of four, across the patches begun since the last finish(), and
  // completes their solutions. Each out must stay in place until finish() returns.
  // Every block goes through the same lanes whatever shares its group, so a patch's
  // result is the same bits however patches are grouped (solve() is begin + finish).
  void begin(const Patch& p, const PatchPlan& plan, const Image& image, const GaussHermitePsf& psf,
             const PatchSolveOptions& opt, PatchSolution& out, ProfileRecorder* rec = nullptr,
             SpotCache* cache = nullptr);
  void finish(ProfileRecorder* rec = nullptr, int patchIndex = -1);
  // Forgets the queued blocks (a batch abandoned by an exception).
  void dropQueue() { m_pending.clear(); }

private:
  // Padded spots, fiber-major: spot a = fiber index * nwave + bin. m_sv points into the
  // cache, or into m_spots where this solver evaluated the spot itself.
  std::vector<SpotView> m_sv;
  std::vector<Spot> m_spots;
  int m_nx = 0, m_ny = 0;
  std::vector<double> m_ws;      // W * S of one spot over its stamp (0 outside the box)
  std::vector<double> m_icov;    // n x n, column-major, lower triangle used: C^-1 from
                                 // normalEquations, then its factor
  std::vector<double> m_y, m_fw;
  std::vector<double> m_cs, m_eig, m_q, m_work;
  std::vector<double> m_z;        // eigenvectors of one fiber block
  std::vector<int> m_iwork;
  std::vector<double> m_modelBox; // model over the box from all padded spots
  std::vector<double> m_chiModel, m_chi2, m_chiUsed; // chi2pix scratch over the box
  BandedCholesky m_band;
  SymEigen m_symEigen;             // the fiber blocks' eigen-decompositions
  BlockBand m_bb;                 // this patch's block band (w = fiber coupling)
  bool m_banded = false;
  bool m_fullLower = true;        // the whole lower triangle is stored, not just the band
  int m_coupling = 0;
  std::vector<int> m_fx0, m_fx1;  // per fiber: x range of its stamps
  std::vector<char> m_fmono;      // per fiber: stamp rows non-decreasing with the bin

  // Dense or banded for this patch (sets m_banded, m_bb) after normalEquations.
  void chooseSolver(const Patch& p, const PatchSolveOptions& opt);

  void spots(const Patch& p, const PatchPlan& plan, const GaussHermitePsf& psf, SpotCache* cache);
  // Also finds the fiber coupling and chooses the solver (before filling the matrix,
  // so the banded path clears and fills only the band).
  void normalEquations(const Patch& p, const Image& image, const PatchSolveOptions& opt,
                       PatchSolution& out);
  // One past the last row of column a of the lower triangle that is stored.
  int bandEnd(int a) const;
  bool factorAndSolve(int n, double regularize, bool keepPrior, PatchSolution& out);
  // Per-fiber decorrelation of fibers [kept0, kept1), the only ones the engine keeps:
  // their blocks C_s of the covariance are queued for finish().
  void decorrelateSignal(int nfib, int nw, int kept0, int kept1, PatchSolution& out);
  struct Pending {
    PatchSolution* out;
    int fiber, nw;
    std::size_t offset; // of its C_s (nw x nw, column-major, lower triangle) in m_cs
  };
  std::vector<Pending> m_pending;   // queued fiber blocks
  void decorrelateNoise(int nfib, int nw, PatchSolution& out);
  void chi2pix(const Patch& p, const Image& image, const PatchSolveOptions& opt, PatchSolution& out);
  // Q = T T^T -> R, ivar, flux and resolution diagonals for one fiber block (T: nw x nw,
  // column-major, leading dimension nw); Q itself is not formed.
  void applyT(const double* t, int fiber, int nw, PatchSolution& out);
};

} // namespace spex
