// Large copies between pageable host memory and the device through a small ring of
// pinned chunks that several host threads fill (uploads) or drain (downloads) while
// the copy engine moves the chunks before and after them. A pageable
// cudaMemcpyAsync stages through the driver's own pinned buffer on one thread (about
// 7 GB/s on the H100 machine: 38 ms for a frame's image and ivar); here the host
// copies run in parallel and overlap the transfers (docs/benchmarks.md, "Issue 12,
// third round").
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <functional>
#include <vector>

namespace spex::gpu {

// One contiguous copy: `bytes` from src to dst (host -> device for upload, device ->
// host for download).
struct CopySegment {
  void* dst = nullptr;
  const void* src = nullptr;
  std::size_t bytes = 0;
};

class PinnedStager {
public:
  // threads: host threads that copy into / out of the ring (0: half the hardware
  // threads, 2 to 8); chunkBytes: size of one pinned chunk; slotsPerThread: chunks in
  // flight per thread. The ring (threads x slotsPerThread x chunkBytes) is allocated on
  // the first copy that needs it and kept.
  explicit PinnedStager(int threads = 0, std::size_t chunkBytes = std::size_t(4) << 20,
                        int slotsPerThread = 2);
  ~PinnedStager(); // with the stager's device current (its events)
  PinnedStager(const PinnedStager&) = delete;
  PinnedStager& operator=(const PinnedStager&) = delete;

  // Host -> device on `stream` (device `device`). Returns once every source byte has
  // been read: the sources may then change; the last chunks' transfers may still run,
  // and work enqueued on `stream` later follows them. Copies of less than two chunks
  // in all go straight through cudaMemcpyAsync. Throws GpuError on a CUDA error.
  void upload(const std::vector<CopySegment>& segments, cudaStream_t stream, int device);
  // Device -> host, after the work already enqueued on `stream`. Returns once every
  // destination byte is written.
  void download(const std::vector<CopySegment>& segments, cudaStream_t stream, int device);

  // Host -> device in blocks (the CUDA engine's image by row blocks, docs/design.md
  // "Pipeline ends"): afterBlock(b) runs once every transfer of blocks 0..b is enqueued
  // on `stream`, on the staging thread that enqueued the last of them (so calls for
  // different blocks may come out of order and at once: afterBlock must be
  // thread-safe), and an event it records on `stream` completes once blocks 0..b are
  // on the device. The blocks are cut into pieces of at most pieceBytes (<=
  // chunkBytes()), dealt to the threads in turn; no thread waits for another. Returns
  // once every source byte has been read. An exception of afterBlock or of a copy stops
  // the rest and is rethrown here.
  void uploadBlocks(const std::vector<std::vector<CopySegment>>& blocks, cudaStream_t stream, int device,
                    std::size_t pieceBytes, const std::function<void(int)>& afterBlock);

  // The pinned ring itself (allocated if need be), for a caller's own transfers between
  // this stager's copies: waits until the ring's last transfers are done, then returns
  // it; `bytes` is its size. Valid until the next upload or download.
  char* borrowRing(int device, std::size_t& bytes);

  int threads() const { return m_threads; }
  std::size_t chunkBytes() const { return m_chunk; }
  std::size_t pinnedBytes() const { return m_ring ? m_ringBytes : 0; }

private:
  struct Piece {
    char* dst;
    const char* src;
    std::size_t bytes;
  };
  std::vector<Piece> split(const std::vector<CopySegment>& segments) const {
    return split(segments, m_chunk);
  }
  std::vector<Piece> split(const std::vector<CopySegment>& segments, std::size_t piece) const;
  void ensureRing(int device);
  template <class Body>
  void runThreads(int device, Body&& body);

  int m_threads = 2;
  std::size_t m_chunk = 0;
  int m_slots = 2;
  char* m_ring = nullptr;
  std::size_t m_ringBytes = 0;
  int m_device = -1;
  std::vector<cudaEvent_t> m_done; // one per slot: its last transfer
  std::vector<char> m_used;        // the slot's event has been recorded
};

} // namespace spex::gpu
