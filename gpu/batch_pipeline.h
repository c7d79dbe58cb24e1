// One batch of patches on one workspace (engine_device.h), as the CUDA engine enqueues
// it: normal equations, solve, decorrelate, chi2pix, each a phase of the device
// timeline (docs/profiling.md). The solve (batch_solve.cpp) and the decorrelation
// (batch_decorrelate.cpp) call the batched routines (batched_cholesky.h,
// batched_fiber_blocks.h, batched_eigh.h) and the kernels (kernels.h); this layer only
// chooses them and points them at the workspace's buffers.
#pragma once

#include "device_timeline.h"
#include "engine_device.h"
#include "kernels.h"

namespace spex::gpu {

inline constexpr const char* kPhaseH2D = "H2D";
inline constexpr const char* kPhaseSpots = "spots";
inline constexpr const char* kPhaseNormal = "normal equations";
inline constexpr const char* kPhaseSolve = "solve";
inline constexpr const char* kPhaseDecorrelate = "decorrelate";
inline constexpr const char* kPhaseChi2 = "chi2pix";
inline constexpr const char* kPhaseD2H = "D2H";
inline constexpr const char* kPhasePlanCorners = "plan corners";

// What the host knows of a batch's patches: the fiber coupling width to solve on
// (F - 1: dense) and the fiber blocks any of them keeps, [keptLo, keptHi).
struct BatchShape {
  int w = 0;
  int keptLo = 0, keptHi = 0;
};

// The whole pipeline on workspace w for patches [first, first + count) of `table` (a
// device array), with the view's fixed fields (layout, spot table, image, frame) from v.
void enqueueBatch(Workspace& w, BatchView v, const DevPatch* table, int first, int count,
                  double regularize, const BatchShape& shape, DeviceTimeline& tl, int batchId);

// Its phases, on v pointed at w's buffers (enqueueBatch does that):
// iCov = L L^T on the batch's band (or cuSOLVER's dense potrf), then f = (L L^T)^-1 y by
// block substitution on the band (selected inversion: L_kk^-1 into C) or X = L^-1,
// f = X^T X y.
void enqueueSolve(Workspace& w, const BatchView& v, const BatchShape& shape, DeviceTimeline& tl,
                  int batchId);
// Signal mode: fiber blocks C_s of iCov^-1, their eigen-pairs, C_s^-1/2 applied (flux,
// ivar, resolution into the frame); noise mode: iCov^1/2 of the whole patch.
void enqueueDecorrelate(Workspace& w, BatchView v, const BatchShape& shape, DeviceTimeline& tl,
                        int batchId);

} // namespace spex::gpu
