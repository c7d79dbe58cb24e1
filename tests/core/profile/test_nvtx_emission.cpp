// Every profiled phase is also an NVTX range of the same name: an NVTX injection
// library records the pushes of a real extraction and they must equal the Profile.
#include "core/extract/cpu_engine.h"
#include "core/io/psf_io.h"
#include "core/profile/profile.h"
#include "core/sim/simulator.h"
#include "test_data.h"

#include <QTest>
#include <algorithm>
#include <cstdlib>
#include <dlfcn.h>
#include <map>
#include <sstream>

using namespace spex;

class TestNvtxEmission : public QObject {
  Q_OBJECT

private slots:
  void rangesMatchProfile() {
    QVERIFY(nvtxCompiledIn());
    SPEX_REQUIRE_DATA(psfPath, "psf-r0-00067784.fits");
    const GaussHermitePsf psf = readPsf(psfPath);
    SimulationOptions so;
    so.wave = WaveGrid::fromRange(6000, 6200, 0.8);
    so.fiberMin = 0;
    so.nFiber = 10;
    const Simulation sim = simulate(psf, so);
    ExtractionRequest req;
    req.image = &sim.image;
    req.psf = &psf;
    req.wave = so.wave;
    req.fiberMin = 0;
    req.nFiber = 10;
    req.threads = 2;
    ProgressSink sink;
    CancelToken ct;
    const ExtractionResult r = CpuEngine().extract(req, sink, ct);

    void* lib = dlopen(SPEX_NVTX_RECORDER, RTLD_NOW | RTLD_NOLOAD);
    QVERIFY2(lib, "NVTX did not load the injection library named in NVTX_INJECTION64_PATH");
    using Fn = const char* (*)(long*);
    auto recorded = reinterpret_cast<Fn>(dlsym(lib, "spexNvtxRecorded"));
    QVERIFY(recorded);
    long pops = 0;
    std::istringstream in(recorded(&pops));
    std::map<std::string, int> nvtx, profile;
    long pushes = 0;
    for (std::string line; std::getline(in, line);) {
      nvtx[line]++;
      ++pushes;
    }
    for (const ProfileRange& pr : r.profile.ranges) profile[pr.name]++;
    QCOMPARE(pops, pushes);
    QVERIFY(pushes > 0);
    // Same names, same counts: every Profile range was an NVTX range and vice versa.
    QCOMPARE(nvtx, profile);
    for (const char* phase : {"extract", "plan", "allocate", "patch", "spots", "normal equations", "solve",
                              "decorrelate", "chi2pix", "assemble", "finalize"})
      QVERIFY2(profile.count(phase), phase);
  }
};

int main(int argc, char** argv) {
  // Must be set before the first NVTX call of the process.
  setenv("NVTX_INJECTION64_PATH", SPEX_NVTX_RECORDER, 1);
  QCoreApplication app(argc, argv);
  TestNvtxEmission t;
  return QTest::qExec(&t, argc, argv);
}
#include "test_nvtx_emission.moc"
