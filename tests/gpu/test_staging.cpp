// gpu::PinnedStager (gpu/staging.h): uploads and downloads through the pinned ring give
// back every byte, for sizes below, at and across the chunk size, several segments at
// once, a ring reused between calls and directions, and 1, 2 and 3 host threads.
#include "gpu/cuda_engine.h"
#include "gpu/staging.h"

#include <QElapsedTimer>
#include <QTest>
#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

using namespace spex;

namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) qFatal("%s: %s", what, cudaGetErrorString(e));
}

std::vector<unsigned char> randomBytes(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& c : v) c = static_cast<unsigned char>(rng());
  return v;
}

// Uploads `sizes` as separate segments into one device buffer (packed, each segment at
// an odd offset), poisons a host copy, downloads into it and compares. Returns the
// number of differing bytes (in the host copy and in the device bytes between
// segments, which must keep their poison).
long long roundTrip(gpu::PinnedStager& st, const std::vector<std::size_t>& sizes, unsigned seed) {
  std::size_t total = 0;
  std::vector<std::size_t> off;
  for (std::size_t s : sizes) {
    off.push_back(total);
    total += s + 3; // 3 untouched bytes after each segment
  }
  unsigned char* d = nullptr;
  check(cudaMalloc(&d, total + 1), "cudaMalloc");
  check(cudaMemset(d, 0xa5, total + 1), "poison device");
  cudaStream_t s = nullptr;
  check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
  std::vector<std::vector<unsigned char>> src;
  std::vector<gpu::CopySegment> up;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    src.push_back(randomBytes(sizes[k], seed + unsigned(k)));
    up.push_back(gpu::CopySegment{d + off[k], src.back().data(), sizes[k]});
  }
  st.upload(up, s, 0);
  // The sources may change once upload returns.
  std::vector<std::vector<unsigned char>> keep = src;
  for (auto& v : src) std::memset(v.data(), 0, v.size());
  std::vector<std::vector<unsigned char>> back;
  std::vector<gpu::CopySegment> down;
  for (std::size_t k = 0; k < sizes.size(); ++k) {
    back.emplace_back(sizes[k], 0x5a);
    down.push_back(gpu::CopySegment{back.back().data(), d + off[k], sizes[k]});
  }
  st.download(down, s, 0);
  long long bad = 0;
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (std::size_t i = 0; i < sizes[k]; ++i) bad += back[k][i] != keep[k][i];
  std::vector<unsigned char> all(total + 1);
  check(cudaStreamSynchronize(s), "sync");
  check(cudaMemcpy(all.data(), d, total + 1, cudaMemcpyDeviceToHost), "D2H all");
  for (std::size_t k = 0; k < sizes.size(); ++k)
    for (int g = 0; g < 3; ++g) bad += all[off[k] + sizes[k] + g] != 0xa5;
  cudaStreamDestroy(s);
  cudaFree(d);
  return bad;
}

} // namespace

class TestStaging : public QObject {
  Q_OBJECT
private slots:
  void initTestCase() {
    std::string why;
    if (!cudaAvailable(&why)) QSKIP(qPrintable("no CUDA device: " + QString::fromStdString(why)));
    check(cudaSetDevice(0), "cudaSetDevice");
  }

  void roundTripsEveryByte() {
    for (int threads : {1, 2, 3}) {
      // Chunks of 64 KiB, 2 in flight per thread: copies below two chunks go straight
      // through, the others through the ring.
      gpu::PinnedStager st(threads, 64 << 10, 2);
      const std::size_t c = st.chunkBytes();
      const std::vector<std::vector<std::size_t>> cases = {
          {0}, {1}, {c - 1}, {2 * c}, {2 * c + 1}, {17 * c + 12345}, {5, 3 * c, 0, c + 1, 7 * c - 3},
          {std::size_t(9) << 20}};
      unsigned seed = 1;
      for (const auto& sizes : cases) {
        const long long bad = roundTrip(st, sizes, seed += 10);
        QVERIFY2(bad == 0, qPrintable(QString("threads %1, case %2: %3 bytes differ")
                                          .arg(st.threads()).arg(seed).arg(bad)));
      }
      QVERIFY(st.pinnedBytes() > 0);
    }
  }

  void blockUploadsWithAnEventPerBlock() {
    // uploadBlocks (the CUDA engine's image by row blocks): afterBlock(k) comes once per
    // block (from any staging thread), and an event it records on the stream marks
    // blocks 0..k on the device: a second stream that waits for it alone copies them
    // back intact. Blocks of odd sizes (one empty), pieces smaller than the chunk, 1 to
    // 3 threads; then a callback that throws: its exception comes out.
    for (int threads : {1, 2, 3}) {
      gpu::PinnedStager st(threads, 64 << 10, 2);
      const std::vector<std::size_t> sizes = {5 * 64 * 1024 + 17, 1, 3 * 64 * 1024, 0, 200 * 1024 + 3, 64 * 1024};
      std::size_t total = 0;
      std::vector<std::size_t> off;
      for (std::size_t b : sizes) {
        off.push_back(total);
        total += b;
      }
      const std::vector<unsigned char> src = randomBytes(total, 77u + unsigned(threads));
      unsigned char* d = nullptr;
      check(cudaMalloc(&d, total), "cudaMalloc");
      check(cudaMemset(d, 0, total), "clear");
      cudaStream_t up = nullptr, down = nullptr;
      check(cudaStreamCreateWithFlags(&up, cudaStreamNonBlocking), "stream");
      check(cudaStreamCreateWithFlags(&down, cudaStreamNonBlocking), "stream");
      std::vector<std::vector<gpu::CopySegment>> blocks;
      for (std::size_t k = 0; k < sizes.size(); ++k) {
        // Two segments a block (like image and ivar rows), split unevenly.
        const std::size_t h = sizes[k] / 3;
        blocks.push_back({{d + off[k], src.data() + off[k], h}, {d + off[k] + h, src.data() + off[k] + h, sizes[k] - h}});
      }
      std::vector<cudaEvent_t> ev(sizes.size());
      for (auto& e : ev) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event");
      std::mutex m;
      std::vector<int> order;
      std::vector<std::vector<unsigned char>> back(sizes.size());
      st.uploadBlocks(blocks, up, 0, 24 * 1024, [&](int k) {
        const std::size_t n = off[std::size_t(k)] + sizes[std::size_t(k)];
        std::lock_guard lock(m);
        order.push_back(k);
        check(cudaEventRecord(ev[std::size_t(k)], up), "record");
        // Everything up to block k, read on the other stream after its event only.
        back[std::size_t(k)].assign(n, 0);
        check(cudaStreamWaitEvent(down, ev[std::size_t(k)], 0), "wait");
        if (n) check(cudaMemcpyAsync(back[std::size_t(k)].data(), d, n, cudaMemcpyDeviceToHost, down), "D2H");
      });
      check(cudaStreamSynchronize(down), "sync");
      std::sort(order.begin(), order.end());
      QCOMPARE(int(order.size()), int(sizes.size()));
      for (std::size_t k = 0; k < order.size(); ++k) QCOMPARE(order[k], int(k));
      for (std::size_t k = 0; k < sizes.size(); ++k)
        QVERIFY2(std::equal(back[k].begin(), back[k].end(), src.begin()),
                 qPrintable(QString("threads %1: blocks 0..%2 not all there after their event").arg(threads).arg(k)));
      // A failing callback: its exception comes out.
      bool threw = false;
      try {
        st.uploadBlocks(blocks, up, 0, 24 * 1024, [&](int k) {
          if (k == 1) throw std::runtime_error("block 1 refused");
        });
      } catch (const std::runtime_error& e) {
        threw = std::string(e.what()) == "block 1 refused";
      }
      QVERIFY(threw);
      check(cudaStreamSynchronize(up), "sync");
      for (auto& e : ev) cudaEventDestroy(e);
      cudaStreamDestroy(up);
      cudaStreamDestroy(down);
      cudaFree(d);
    }
  }

  void frameSizedUploadTimed() {
    // A frame's image and ivar (2 x 4162 x 4096 doubles): timing for the notes only.
    const std::size_t n = std::size_t(4162) * 4096;
    std::vector<double> a(n), b(n);
    for (std::size_t i = 0; i < n; ++i) a[i] = double(i) * 0.5, b[i] = 1.0 / double(i + 1);
    double* d = nullptr;
    check(cudaMalloc(&d, 2 * n * sizeof(double)), "cudaMalloc");
    cudaStream_t s = nullptr;
    check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream");
    gpu::PinnedStager st;
    std::vector<gpu::CopySegment> up{{d, a.data(), n * sizeof(double)}, {d + n, b.data(), n * sizeof(double)}};
    auto time = [&](auto&& f) {
      double best = 1e30;
      for (int r = 0; r < 5; ++r) {
        QElapsedTimer t;
        t.start();
        f();
        check(cudaStreamSynchronize(s), "sync");
        best = std::min(best, t.nsecsElapsed() * 1e-6);
      }
      return best;
    };
    const double pinned = time([&] { st.upload(up, s, 0); });
    const double pageable = time([&] {
      check(cudaMemcpyAsync(d, a.data(), n * sizeof(double), cudaMemcpyHostToDevice, s), "H2D");
      check(cudaMemcpyAsync(d + n, b.data(), n * sizeof(double), cudaMemcpyHostToDevice, s), "H2D");
    });
    std::vector<gpu::CopySegment> down{{a.data(), d, n * sizeof(double)}, {b.data(), d + n, n * sizeof(double)}};
    const double pinnedDown = time([&] { st.download(down, s, 0); });
    const double pageableDown = time([&] {
      check(cudaMemcpyAsync(a.data(), d, n * sizeof(double), cudaMemcpyDeviceToHost, s), "D2H");
      check(cudaMemcpyAsync(b.data(), d + n, n * sizeof(double), cudaMemcpyDeviceToHost, s), "D2H");
    });
    qInfo("272 MB, best of 5: upload staged %.1f ms (%d threads), pageable %.1f ms; download staged %.1f ms, "
          "pageable %.1f ms",
          pinned, st.threads(), pageable, pinnedDown, pageableDown);
    for (std::size_t i = 0; i < n; i += 4099) QCOMPARE(a[i], double(i) * 0.5);
    cudaStreamDestroy(s);
    cudaFree(d);
  }
};

QTEST_GUILESS_MAIN(TestStaging)
#include "test_staging.moc"
