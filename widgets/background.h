// The thread pool for the workbench's long background work (extractions, engine
// comparisons, sweeps, full-CCD renders). Not QThreadPool::globalInstance(): Qt's
// raster paint engine splits image scaling and conversion over the global pool and
// waits for those pieces, so on a 2-core machine (2 global threads) one long job there
// plus one more stalls every repaint of the window until the job ends.
#pragma once

class QThreadPool;

namespace spex {

QThreadPool* backgroundPool();

} // namespace spex
