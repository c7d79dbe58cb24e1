// rankFiberRange: every bundle goes to exactly one rank, in order, contiguous, with
// block sizes differing by at most one bundle; odd specmin/nspec and more ranks than
// bundles are handled; bad ranks are clear errors.
#include "core/errors.h"
#include "core/plan/rank_split.h"

#include <QTest>

using namespace spex;

class TestRankSplit : public QObject {
  Q_OBJECT
private slots:
  void coversEveryFiberOnce_data() {
    QTest::addColumn<int>("fiberMin");
    QTest::addColumn<int>("nFiber");
    QTest::addColumn<int>("bundlesize");
    QTest::addColumn<int>("size");
    QTest::newRow("500 fibers, 2 ranks") << 0 << 500 << 25 << 2;
    QTest::newRow("500 fibers, 3 ranks") << 0 << 500 << 25 << 3;
    QTest::newRow("partial last bundle") << 25 << 60 << 25 << 2;
    QTest::newRow("more ranks than bundles") << 0 << 50 << 25 << 5;
    QTest::newRow("one rank") << 100 << 75 << 25 << 1;
  }
  void coversEveryFiberOnce() {
    QFETCH(int, fiberMin);
    QFETCH(int, nFiber);
    QFETCH(int, bundlesize);
    QFETCH(int, size);
    int next = fiberMin, minB = 1 << 30, maxB = 0;
    for (int r = 0; r < size; ++r) {
      const FiberRange fr = rankFiberRange(fiberMin, nFiber, bundlesize, r, size);
      if (fr.nFiber == 0) {
        minB = 0;
        continue;
      }
      QCOMPARE(fr.fiberMin, next); // contiguous and in rank order
      QCOMPARE((fr.fiberMin - fiberMin) % bundlesize, 0); // starts on a bundle
      next = fr.fiberMin + fr.nFiber;
      const int nb = (fr.nFiber + bundlesize - 1) / bundlesize;
      minB = std::min(minB, nb);
      maxB = std::max(maxB, nb);
    }
    QCOMPARE(next, fiberMin + nFiber);
    QVERIFY(maxB - minB <= 1);
  }
  void badRanks() {
    QVERIFY_THROWS_EXCEPTION(InputError, rankFiberRange(0, 500, 25, 2, 2));
    QVERIFY_THROWS_EXCEPTION(InputError, rankFiberRange(0, 500, 25, 0, 0));
    QVERIFY_THROWS_EXCEPTION(InputError, rankFiberRange(0, 0, 25, 0, 1));
  }
};

QTEST_APPLESS_MAIN(TestRankSplit)
#include "test_rank_split.moc"
