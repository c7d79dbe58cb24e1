// PinnedStager (staging.h): chunk c of a copy belongs to host thread c % T, which
// cycles through its own S slots of the pinned ring, so a slot and its event are only
// ever touched by one thread and no locking is needed. Several threads enqueue onto
// the same stream; the order of their chunks on the copy engine does not matter (the
// chunks are disjoint) and no transfer waits on the host.
#include "staging.h"

#include "kernels.h"

#include <algorithm>
#include <atomic>
#include <mutex>
#include <cstring>
#include <exception>
#include <thread>

namespace spex::gpu {

PinnedStager::PinnedStager(int threads, std::size_t chunkBytes, int slotsPerThread)
    : m_chunk(std::max<std::size_t>(chunkBytes, 4096)), m_slots(std::max(slotsPerThread, 1)) {
  m_threads = threads > 0 ? std::min(threads, 8)
                          : std::clamp(int(std::thread::hardware_concurrency() / 2), 2, 8);
}

PinnedStager::~PinnedStager() {
  for (cudaEvent_t e : m_done) cudaEventDestroy(e);
  if (m_ring) cudaFreeHost(m_ring);
}

std::vector<PinnedStager::Piece> PinnedStager::split(const std::vector<CopySegment>& segments,
                                                     std::size_t piece) const {
  std::vector<Piece> pieces;
  for (const CopySegment& s : segments)
    for (std::size_t o = 0; o < s.bytes; o += piece)
      pieces.push_back(Piece{static_cast<char*>(s.dst) + o, static_cast<const char*>(s.src) + o,
                             std::min(piece, s.bytes - o)});
  return pieces;
}

void PinnedStager::ensureRing(int device) {
  if (m_ring && m_device == device) return;
  for (cudaEvent_t e : m_done) cudaEventDestroy(e);
  m_done.clear();
  if (m_ring) cudaFreeHost(m_ring);
  m_ring = nullptr;
  const int nslot = m_threads * m_slots;
  void* p = nullptr;
  SPEX_CUDA(cudaMallocHost(&p, std::size_t(nslot) * m_chunk));
  m_ring = static_cast<char*>(p);
  m_ringBytes = std::size_t(nslot) * m_chunk;
  m_device = device;
  for (int k = 0; k < nslot; ++k) {
    cudaEvent_t e = nullptr;
    SPEX_CUDA(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
    m_done.push_back(e);
  }
  m_used.assign(nslot, 0);
}

template <class Body>
void PinnedStager::runThreads(int device, Body&& body) {
  std::vector<std::exception_ptr> errors(m_threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < m_threads; ++t)
    pool.emplace_back([&, t] {
      try {
        SPEX_CUDA(cudaSetDevice(device)); // the current device is per host thread
        body(t);
      } catch (...) {
        errors[t] = std::current_exception();
      }
    });
  for (auto& th : pool) th.join();
  for (auto& e : errors)
    if (e) std::rethrow_exception(e);
}

void PinnedStager::upload(const std::vector<CopySegment>& segments, cudaStream_t stream, int device) {
  std::size_t total = 0;
  for (const CopySegment& s : segments) total += s.bytes;
  if (total < 2 * m_chunk) {
    for (const CopySegment& s : segments)
      if (s.bytes)
        SPEX_CUDA(cudaMemcpyAsync(s.dst, s.src, s.bytes, cudaMemcpyHostToDevice, stream));
    return;
  }
  ensureRing(device);
  const std::vector<Piece> pieces = split(segments);
  runThreads(device, [&](int t) {
    int j = 0;
    for (std::size_t c = t; c < pieces.size(); c += m_threads, ++j) {
      const int slot = t * m_slots + j % m_slots;
      char* buf = m_ring + std::size_t(slot) * m_chunk;
      if (m_used[slot]) SPEX_CUDA(cudaEventSynchronize(m_done[slot])); // its last transfer read it
      std::memcpy(buf, pieces[c].src, pieces[c].bytes);
      SPEX_CUDA(cudaMemcpyAsync(pieces[c].dst, buf, pieces[c].bytes, cudaMemcpyHostToDevice, stream));
      SPEX_CUDA(cudaEventRecord(m_done[slot], stream));
      m_used[slot] = 1;
    }
  });
}

void PinnedStager::uploadBlocks(const std::vector<std::vector<CopySegment>>& blocks, cudaStream_t stream,
                                int device, std::size_t pieceBytes, const std::function<void(int)>& afterBlock) {
  ensureRing(device);
  const std::size_t piece = std::clamp<std::size_t>(pieceBytes, 4096, m_chunk);
  // Piece g of all blocks in order goes to thread g % T, which works through its own
  // pieces in order; no thread waits for another. Each thread, done with its pieces of
  // block b, counts itself in arrived[b]; the last to arrive runs afterBlock(b): every
  // piece of blocks 0..b has been enqueued by then (each thread goes through the blocks
  // in order), so an event it records follows them all.
  struct Item {
    Piece piece;
    int block;
  };
  std::vector<Item> items;
  for (std::size_t b = 0; b < blocks.size(); ++b)
    for (const Piece& p : split(blocks[b], piece)) items.push_back(Item{p, int(b)});
  const int nblock = int(blocks.size());
  std::vector<std::atomic<int>> arrived(std::size_t(std::max(nblock, 1)));
  for (auto& a : arrived) a.store(0);
  std::atomic<bool> failed{false};
  std::mutex errorMutex;
  std::exception_ptr callbackError;
  auto arrive = [&](int b) {
    if (arrived[std::size_t(b)].fetch_add(1, std::memory_order_acq_rel) + 1 != m_threads || failed.load()) return;
    try {
      afterBlock(b);
    } catch (...) {
      std::lock_guard lock(errorMutex);
      if (!callbackError) callbackError = std::current_exception();
      failed = true;
    }
  };
  runThreads(device, [&](int t) {
    int j = 0;     // this thread's pieces so far: piece j lives in slot j % S
    int block = 0; // the block this thread is in (every earlier one it has arrived at)
    try {
      for (std::size_t g = std::size_t(t); g < items.size() && !failed.load(); g += m_threads, ++j) {
        const Item& it = items[g];
        for (; block < it.block; ++block) arrive(block);
        const int slot = t * m_slots + j % m_slots;
        char* buf = m_ring + std::size_t(slot) * m_chunk;
        if (m_used[slot]) SPEX_CUDA(cudaEventSynchronize(m_done[slot])); // its last transfer read it
        std::memcpy(buf, it.piece.src, it.piece.bytes);
        SPEX_CUDA(cudaMemcpyAsync(it.piece.dst, buf, it.piece.bytes, cudaMemcpyHostToDevice, stream));
        SPEX_CUDA(cudaEventRecord(m_done[slot], stream));
        m_used[slot] = 1;
      }
      for (; block < nblock; ++block) arrive(block);
    } catch (...) {
      failed = true;
      throw;
    }
  });
  if (callbackError) std::rethrow_exception(callbackError);
}

char* PinnedStager::borrowRing(int device, std::size_t& bytes) {
  ensureRing(device);
  for (std::size_t k = 0; k < m_done.size(); ++k)
    if (m_used[k]) SPEX_CUDA(cudaEventSynchronize(m_done[k]));
  bytes = m_ringBytes;
  return m_ring;
}

void PinnedStager::download(const std::vector<CopySegment>& segments, cudaStream_t stream, int device) {
  std::size_t total = 0;
  for (const CopySegment& s : segments) total += s.bytes;
  if (total < 2 * m_chunk) {
    for (const CopySegment& s : segments)
      if (s.bytes)
        SPEX_CUDA(cudaMemcpyAsync(s.dst, s.src, s.bytes, cudaMemcpyDeviceToHost, stream));
    SPEX_CUDA(cudaStreamSynchronize(stream));
    return;
  }
  ensureRing(device);
  const std::vector<Piece> pieces = split(segments);
  runThreads(device, [&](int t) {
    // This thread's chunks: c = t, t + T, ...; chunk j of them lives in slot j % S.
    std::vector<std::size_t> mine;
    for (std::size_t c = t; c < pieces.size(); c += m_threads) mine.push_back(c);
    auto enqueue = [&](std::size_t j) {
      const int slot = t * m_slots + int(j % m_slots);
      const Piece& p = pieces[mine[j]];
      SPEX_CUDA(cudaMemcpyAsync(m_ring + std::size_t(slot) * m_chunk, p.src, p.bytes,
                                cudaMemcpyDeviceToHost, stream));
      SPEX_CUDA(cudaEventRecord(m_done[slot], stream));
      m_used[slot] = 1;
    };
    for (std::size_t j = 0; j < mine.size() && j < std::size_t(m_slots); ++j) enqueue(j);
    for (std::size_t j = 0; j < mine.size(); ++j) {
      const int slot = t * m_slots + int(j % m_slots);
      SPEX_CUDA(cudaEventSynchronize(m_done[slot]));
      const Piece& p = pieces[mine[j]];
      std::memcpy(p.dst, m_ring + std::size_t(slot) * m_chunk, p.bytes);
      if (j + m_slots < mine.size()) enqueue(j + m_slots);
    }
  });
}

} // namespace spex::gpu
