// Engine factory: byte sizes for --gpu-memory / SPEXLAB_CUDA_MEMORY, and the
// SPEXLAB_CUDA_* switches it reads (bad values are errors that name the variable);
// --gpu-memory as a size or a fraction of the device.
#include "app/engine_factory.h"
#include "core/errors.h"

#include <QTest>
#include <cstdlib>

using namespace spex;

class TestEngineFactory : public QObject {
  Q_OBJECT
private slots:
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
                         Case{"SPEXLAB_CUDA_EIGH", "lapack"}, Case{"SPEXLAB_CUDA_CHOLESKY", "lu"}}) {
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
