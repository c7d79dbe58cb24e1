// Engine factory: byte sizes for --gpu-memory / SPEXLAB_CUDA_MEMORY, and the
// SPEXLAB_CUDA_* switches it reads (bad values are errors that name the variable);
// --gpu-memory as a size or a fraction of the device; the CUDA math libraries opened only
// when a CUDA engine needs them (a CPU extraction maps none of them).
#include "app/engine_factory.h"
#include "core/errors.h"
#include "core/sim/simulator.h"
#ifdef SPEXLAB_HAVE_CUDA
#include "gpu/cuda_libraries.h"
#endif

#include <QTest>
#include <cmath>
#include <cstdlib>
#include <fstream>

using namespace spex;

namespace {
class NullProgress : public ProgressSink {};

// The CUDA math libraries and CUPTI mapped into this process (/proc/self/maps).
QStringList mappedCudaLibraries() {
  QStringList out;
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    for (const char* lib : {"libcublas", "libcusolver", "libcusparse", "libnvJitLink", "libcupti"})
      if (line.find(std::string("/") + lib) != std::string::npos && !out.contains(lib)) out << lib;
  return out;
}
} // namespace

class TestEngineFactory : public QObject {
  Q_OBJECT
private slots:
  // First (the slots run in order): a CPU extraction in a process of a CUDA build maps
  // none of cuBLAS, cuSOLVER (and what they pull in) or CUPTI; they were linked, and
  // mapped at every start, before issue 12's cold-start work.
  void cpuExtractionLoadsNoCudaMathLibrary() {
    QVERIFY2(mappedCudaLibraries().isEmpty(), qPrintable(mappedCudaLibraries().join(", ")));
    SyntheticPsfOptions po;
    const GaussHermitePsf psf = makeSyntheticPsf(po);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6080, 0.8);
    so.nFiber = 10;
    so.seed = 5;
    const Simulation sim = simulate(psf, so);
    EngineChoice c = makeEngine("cpu");
    QCOMPARE(c.engine->name(), std::string("cpu"));
    QVERIFY(c.steps.empty());
    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &psf;
    req.wave = so.wave;
    req.nFiber = so.nFiber;
    req.threads = 2;
    NullProgress np;
    CancelToken ct;
    const ExtractionResult r = c.engine->extract(req, np, ct);
    QCOMPARE(r.nfiber, 10);
    int finite = 0;
    for (double v : r.flux.data) finite += std::isfinite(v);
    QCOMPARE(finite, int(r.flux.data.size()));
    QVERIFY2(mappedCudaLibraries().isEmpty(), qPrintable(mappedCudaLibraries().join(", ")));
  }

#ifdef SPEXLAB_HAVE_CUDA
  // The loader opens them on demand (no GPU needed to open a library), and a library
  // that is not there is named with every place tried.
  void cudaMathLibrariesLoadOnDemand() {
    std::string why;
    QVERIFY2(gpu::loadCudaMathLibraries(&why), why.c_str());
    const QStringList mapped = mappedCudaLibraries();
    QVERIFY2(mapped.contains("libcublas") && mapped.contains("libcusolver"), qPrintable(mapped.join(", ")));
    QVERIFY(gpu::loadCudaMathLibraries(&why)); // once per process, same answer
  }

  void missingCudaLibraryIsNamed() {
    std::string why;
    QVERIFY(!gpu::openCudaLibrary("libcublas.so.999", &why));
    QVERIFY2(why.find("cannot load libcublas.so.999") == 0, why.c_str());
    for (const std::string& place : gpu::cudaLibraryCandidates("libcublas.so.999"))
      QVERIFY2(why.find(place) != std::string::npos, why.c_str());
    QVERIFY(gpu::cudaLibraryCandidates("libcublas.so.999").size() >= 2); // soname + beside libcudart
  }
#endif

  void byteSizes() {
    QCOMPARE(parseByteSize("4G", "--gpu-memory"), std::size_t(4) << 30);
    QCOMPARE(parseByteSize("4GiB", "--gpu-memory"), std::size_t(4) << 30);
    QCOMPARE(parseByteSize("4gb", "--gpu-memory"), std::size_t(4) << 30);
    QCOMPARE(parseByteSize("512M", "--gpu-memory"), std::size_t(512) << 20);
    QCOMPARE(parseByteSize("1.5G", "--gpu-memory"), std::size_t(3) << 29);
    QCOMPARE(parseByteSize("4294967296", "--gpu-memory"), std::size_t(4294967296ull));
    QCOMPARE(parseByteSize("64k", "x"), std::size_t(65536));
    for (const char* bad : {"", "G", "4X", "4GG", "-1G", "0", "nan", "inf", "4 G"}) {
      try {
        parseByteSize(bad, "--gpu-memory");
        QFAIL(qPrintable(QString("accepted '%1'").arg(bad)));
      } catch (const InputError& e) {
        QVERIFY2(QString(e.what()).contains("--gpu-memory"), e.what());
      }
    }
  }

  void gpuMemoryBudgetSizesAndFractions() {
    // Sizes go through parseByteSize; "1" and up are bytes, not a fraction.
    QCOMPARE(gpuMemoryBudget("6G", {}), std::size_t(6) << 30);
    QCOMPARE(gpuMemoryBudget("2048", {}), std::size_t(2048));
    for (const char* bad : {"0", "0.0", "-0.2", "abc"}) {
      try {
        gpuMemoryBudget(bad, {});
        QFAIL(qPrintable(QString("accepted '%1'").arg(bad)));
      } catch (const InputError& e) {
        QVERIFY2(QString(e.what()).contains("--gpu-memory"), e.what());
      }
    }
    if (visibleGpuCount() == 0) {
      // A fraction needs a GPU to take it of: a clear error here.
      try {
        gpuMemoryBudget("0.2", {});
        QFAIL("a fraction was accepted without a GPU");
      } catch (const InputError& e) {
        QVERIFY2(QString(e.what()).contains("fraction"), e.what());
      }
    } else {
      const std::size_t b = gpuMemoryBudget("0.25", {});
      QVERIFY(b > (std::size_t(1) << 30)); // a quarter of any current datacenter GPU
      QCOMPARE(gpuMemoryBudget("0.5", {}) / 2 / (1 << 20), b / (1 << 20));
    }
  }

  void badCudaSwitchesNameTheVariable() {
    if (!cudaBuilt()) QSKIP("built without the CUDA engine: the switches are not read");
    struct Case {
      const char* name;
      const char* value;
    };
    for (const Case c : {Case{"SPEXLAB_CUDA_STREAMS", "two"}, Case{"SPEXLAB_CUDA_STREAMS", "0"},
                         Case{"SPEXLAB_CUDA_BATCH", "-5"}, Case{"SPEXLAB_CUDA_MEMORY", "lots"},
                         Case{"SPEXLAB_CUDA_EIGH", "lapack"}, Case{"SPEXLAB_CUDA_CHOLESKY", "lu"},
                         Case{"SPEXLAB_CUDA_INVERSE", "dense"}, Case{"SPEXLAB_CUDA_WARMUP", "yes"},
                         Case{"SPEXLAB_CUDA_NORMAL", "dense"}, Case{"SPEXLAB_CUDA_SPOTS", "thread"},
                         Case{"SPEXLAB_CUDA_OVERLAP", "yes"}, Case{"SPEXLAB_CUDA_GEMM", "magma"},
                         Case{"SPEXLAB_CUDA_PLANAHEAD", "2"}, Case{"SPEXLAB_CUDA_SELINV", "split"},
                         Case{"SPEXLAB_CUDA_KEEPRESULT", "no"}, Case{"SPEXLAB_CUDA_EIGH_REDUCE", "thread"},
                         Case{"SPEXLAB_CUDA_EIGH_ORTHO", "qr"}, Case{"SPEXLAB_CUDA_EIGH_VALUES", "ql"},
                         Case{"SPEXLAB_CUDA_EIGH_VECTORS", "shared"}}) {
      qputenv(c.name, c.value);
      try {
        makeEngine("auto");
        QFAIL(qPrintable(QString("%1=%2 accepted").arg(c.name, c.value)));
      } catch (const InputError& e) {
        QVERIFY2(QString(e.what()).contains(c.name), e.what());
      }
      qunsetenv(c.name);
    }
    // The CPU engine reads none of them.
    qputenv("SPEXLAB_CUDA_STREAMS", "two");
    QVERIFY(makeEngine("cpu").engine);
    qunsetenv("SPEXLAB_CUDA_STREAMS");
  }

  // Engines stay warm: one per name, made on first use and leased again after; a kind
  // that cannot be made is not kept (the next lease tries again).
  void registryKeepsOneEnginePerName() {
    EngineRegistry r;
    QCOMPARE(r.enginesMade(), 0);
    Engine* first = r.lease("cpu").engine;
    QVERIFY(first);
    QCOMPARE(r.enginesMade(), 1);
    QCOMPARE(r.lease("cpu").engine, first);
    QCOMPARE(r.enginesMade(), 1);
    if (resolveEngineKind("auto") == "cpu") QCOMPARE(r.lease("auto").engine, first); // the one auto rule
    QVERIFY_THROWS_EXCEPTION(InputError, r.lease("fpga"));
    QCOMPARE(r.enginesMade(), 1);
    r.clear();
    QVERIFY(r.lease("cpu").engine);
    QCOMPARE(r.enginesMade(), 2); // cleared: made again
  }
};

QTEST_GUILESS_MAIN(TestEngineFactory)
#include "test_engine_factory.moc"
