// Outputs committed together and temporaries cleaned (issue 11, docs/reliability.md):
// an OutputTransaction renames all its outputs or none; a failure after the first
// output was written leaves every target as it was and no temporary; stale
// temporaries of dead processes beside a target are removed, live ones are not.
#include "core/errors.h"
#include "core/io/fits_file.h"

#include <QTemporaryDir>
#include <QTest>

#include <filesystem>
#include <fstream>
#include <thread>
#include <sys/wait.h>
#include <unistd.h>

using namespace spex;
namespace fs = std::filesystem;

namespace {

void writeTiny(const std::string& path, double value) {
  AtomicOutput out(path);
  out.file().writeImage("X", FitsPixel::Float64, std::vector<double>{value});
  out.commit();
}

double readTiny(const std::string& path) {
  FitsFile f = FitsFile::openRead(path);
  f.moveTo("X");
  return f.readImage1D(1)[0];
}

int temporariesIn(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    n += e.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}

// A pid that ran and is gone: a child that exited and was reaped.
pid_t deadPid() {
  const pid_t p = ::fork();
  if (p == 0) ::_exit(0);
  int st = 0;
  ::waitpid(p, &st, 0);
  return p;
}

} // namespace

class TestAtomicOutputs : public QObject {
  Q_OBJECT
  QTemporaryDir m_tmp;
  std::string path(const char* name) { return m_tmp.path().toStdString() + "/" + name; }

private slots:
  void transactionRenamesBoth() {
    const std::string frame = path("frame.fits"), model = path("model.fits");
    writeTiny(frame, 1);
    writeTiny(model, 1);
    {
      OutputTransaction t;
      writeTiny(model, 2);
      writeTiny(frame, 2);
      // Written and synced, not yet renamed: the old files are still in place.
      QCOMPARE(readTiny(frame), 1.0);
      QCOMPARE(readTiny(model), 1.0);
      QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 2);
      t.commit();
    }
    QCOMPARE(readTiny(frame), 2.0);
    QCOMPARE(readTiny(model), 2.0);
    QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 0);
  }

  void failureAfterTheFirstOutputKeepsBothOld() {
    const std::string frame = path("frame2.fits"), model = path("model2.fits");
    writeTiny(frame, 1);
    writeTiny(model, 1);
    try {
      OutputTransaction t;
      writeTiny(model, 3);
      // The second output fails (as a model write on a full disk did, issue 11 #5).
      throw FitsError(frame, "", "", "simulated write failure");
    } catch (const FitsError&) {
    }
    QCOMPARE(readTiny(frame), 1.0);
    QCOMPARE(readTiny(model), 1.0);
    QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 0);
  }

  // The model written on another thread (Join) belongs to the transaction; the frame,
  // written and committed first here, is still renamed after it (renameLast), and a
  // failure on either thread leaves both targets as they were.
  void outputsWrittenOnTwoThreadsCommitTogether() {
    const std::string frame = path("frame3.fits"), model = path("model3.fits");
    writeTiny(frame, 1);
    writeTiny(model, 1);
    {
      OutputTransaction t;
      t.renameLast(frame);
      writeTiny(frame, 4);
      std::thread other([&] {
        OutputTransaction::Join join(t);
        writeTiny(model, 4);
      });
      other.join();
      QCOMPARE(readTiny(frame), 1.0);
      QCOMPARE(readTiny(model), 1.0);
      QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 2);
      t.commit(); // renameLastOrdersTheRenames checks the order

    }
    QCOMPARE(readTiny(frame), 4.0);
    QCOMPARE(readTiny(model), 4.0);
    QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 0);
    // Outputs of a thread without a Join are not the transaction's: renamed at once.
    {
      OutputTransaction t;
      std::thread other([&] { writeTiny(model, 5); });
      other.join();
      QCOMPARE(readTiny(model), 5.0);
    }
    // A failure on the model's thread after the frame was written: nothing changes.
    try {
      OutputTransaction t;
      t.renameLast(frame);
      writeTiny(frame, 6);
      std::exception_ptr failed;
      std::thread other([&] {
        OutputTransaction::Join join(t);
        try {
          AtomicOutput out(model);
          out.file().writeImage("X", FitsPixel::Float64, std::vector<double>{6});
          throw FitsError(model, "", "", "simulated write failure");
        } catch (...) {
          failed = std::current_exception();
        }
      });
      other.join();
      std::rethrow_exception(failed);
    } catch (const FitsError&) {
    }
    QCOMPARE(readTiny(frame), 4.0);
    QCOMPARE(readTiny(model), 5.0);
    QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 0);
  }

  void renameLastOrdersTheRenames() {
    // A rename that fails shows the order: the model, committed after the frame but
    // renamed first, fails (its directory is gone), and the frame, renamed last, is
    // left as it was.
    const std::string dir = path("gone");
    fs::create_directory(dir);
    const std::string frame = path("frame4.fits"), model = dir + "/model4.fits";
    writeTiny(frame, 1);
    try {
      OutputTransaction t;
      t.renameLast(frame);
      writeTiny(frame, 7);  // committed first
      writeTiny(model, 7);  // committed second, renamed first
      fs::remove_all(dir); // the model's temporary and its directory go
      t.commit();
      QFAIL("commit renamed a temporary that was removed");
    } catch (const FitsError& e) {
      QVERIFY2(std::string(e.what()).find("model4.fits") != std::string::npos, e.what());
    }
    QCOMPARE(readTiny(frame), 1.0); // not renamed: it comes last
    QCOMPARE(temporariesIn(m_tmp.path().toStdString()), 0);
  }

  void staleTemporariesOfDeadProcessesAreRemoved() {
    const std::string target = path("stale.fits");
    const std::string dead = target + ".tmp-" + std::to_string(deadPid()) + "-1";
    const std::string deadGz = path("stale.fits.tmp-") + std::to_string(deadPid()) + "-7.gz";
    const std::string live = target + ".tmp-" + std::to_string(::getppid()) + "-1";
    const std::string other = path("other.fits.tmp-") + std::to_string(deadPid()) + "-1";
    for (const auto& p : {dead, deadGz, live, other}) std::ofstream(p) << "partial";
    writeTiny(target, 5);
    QVERIFY(!fs::exists(dead));
    QVERIFY(!fs::exists(deadGz));
    QVERIFY2(fs::exists(live), "a running process's temporary was removed");
    QVERIFY2(fs::exists(other), "another target's temporary was removed");
    QCOMPARE(readTiny(target), 5.0);
    fs::remove(live);
    fs::remove(other);
  }

  void liveTemporariesAreListedForSignalHandlers() {
    const std::string target = path("live.fits");
    AtomicOutput out(target);
    QVERIFY(fs::exists(out.tempPath()));
    removeLiveTemporaries(); // what the SIGINT/SIGTERM handler calls before _exit
    QVERIFY(!fs::exists(out.tempPath()));
    QVERIFY(!fs::exists(target));
  }
};

QTEST_GUILESS_MAIN(TestAtomicOutputs)
#include "test_atomic_outputs.moc"
