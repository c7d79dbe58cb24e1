// core/threads.h: the default worker count follows OMP_NUM_THREADS, then
// SLURM_CPUS_PER_TASK, then the affinity mask, and never exceeds the mask; the CPU
// engine's pool takes that count when the request says 0.
#include "core/threads.h"

#include <QTest>
#include <cstdlib>
#include <sched.h>

using namespace spex;

class TestThreads : public QObject {
  Q_OBJECT
  cpu_set_t m_saved;

  void clearEnv() {
    unsetenv("OMP_NUM_THREADS");
    unsetenv("SLURM_CPUS_PER_TASK");
  }

private slots:
  void initTestCase() { QCOMPARE(sched_getaffinity(0, sizeof m_saved, &m_saved), 0); }
  void cleanup() {
    clearEnv();
    sched_setaffinity(0, sizeof m_saved, &m_saved);
  }

  void affinityMaskIsTheDefault() {
    clearEnv();
    const int cpus = CPU_COUNT(&m_saved);
    QCOMPARE(affinityCpuCount(), cpus);
    const ThreadCount t = defaultThreadCount();
    QCOMPARE(t.threads, cpus);
    QCOMPARE(t.source, std::string("affinity mask"));
    QCOMPARE(resolveThreads(0), cpus);
    QCOMPARE(resolveThreads(3), 3); // an explicit --threads is taken as given
  }

  void narrowedMaskIsSeen() {
    // Keep only the first CPU of the mask, as Slurm's task binding would.
    cpu_set_t one;
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &m_saved)) {
        CPU_SET(c, &one);
        break;
      }
    QCOMPARE(sched_setaffinity(0, sizeof one, &one), 0);
    clearEnv();
    QCOMPARE(affinityCpuCount(), 1);
    QCOMPARE(defaultThreadCount().threads, 1);
    // A larger OMP_NUM_THREADS is clamped to the CPUs given.
    setenv("OMP_NUM_THREADS", "8", 1);
    QCOMPARE(defaultThreadCount().threads, 1);
    QCOMPARE(defaultThreadCount().source, std::string("OMP_NUM_THREADS"));
  }

  void environmentOrder() {
    if (CPU_COUNT(&m_saved) < 2) QSKIP("needs 2 CPUs in the affinity mask");
    clearEnv();
    setenv("SLURM_CPUS_PER_TASK", "1", 1);
    QCOMPARE(defaultThreadCount().threads, 1);
    QCOMPARE(defaultThreadCount().source, std::string("SLURM_CPUS_PER_TASK"));
    setenv("OMP_NUM_THREADS", "2,1", 1); // OpenMP's nested list: the first level counts
    QCOMPARE(defaultThreadCount().threads, 2);
    QCOMPARE(defaultThreadCount().source, std::string("OMP_NUM_THREADS"));
    setenv("OMP_NUM_THREADS", "many", 1); // not a count: ignored, Slurm's is next
    QCOMPARE(defaultThreadCount().threads, 1);
    setenv("OMP_NUM_THREADS", "0", 1);
    QCOMPARE(defaultThreadCount().source, std::string("SLURM_CPUS_PER_TASK"));
    setenv("SLURM_CPUS_PER_TASK", "-3", 1);
    QCOMPARE(defaultThreadCount().source, std::string("affinity mask"));
  }
};

QTEST_APPLESS_MAIN(TestThreads)
#include "test_threads.moc"
