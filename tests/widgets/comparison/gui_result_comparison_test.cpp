// The Compare results dock on the real main window (offscreen), issue 14:
// - two CPU runs of a simulated frame with other patch parameters: the second run
//   merges into the first's result, yet the first run keeps its own numbers; the
//   σ spectrum and the |Δ|/σ map hold binPull of every bin; clicking a map cell
//   selects that fiber and wavelength, centres the CCD on it and the spectrum view
//   draws the fiber; the comparison does not change when later runs do;
// - a run on part of the shared DESI exposure against desispec's production frame:
//   compared on the overlap, which the view says, with compareFrames' numbers;
// - two frame files: the table is, line for line, what `spexlab-cli compare` prints
//   (with --overlap for other fiber ranges); a barycentric-corrected frame against an
//   uncorrected one is refused naming HELIOCOR;
// - without a GPU the CUDA choice is a disabled line saying why, and the CPU vs
//   CUDA dock greys its button and offers the other comparisons.
#include "gui_test_sim.h"
#include "test_data.h"

#include "app/engine_factory.h"
#include "app/gui/analysis_docks.h"
#include "app/gui/comparison_dock.h"
#include "app/gui/main_window.h"
#include "core/extract/compare.h"
#include "core/io/frame_io.h"
#include "widgets/comparison/frame_comparison_view.h"
#include "widgets/comparison/pull_map_view.h"
#include "widgets/spectrum_view.h"
#include "widgets/profiling/engine_comparison_view.h"
#include "widgets/view_state.h"

#include <QComboBox>
#include <QDir>
#include <QLabel>
#include <QProcess>
#include <QPushButton>
#include <QSignalSpy>
#include <QStandardItemModel>
#include <QTableWidget>
#include <QTemporaryDir>
#include <QTest>

#include <cmath>

using namespace spex;

namespace {

QStringList tableLines(const QTableWidget* t) {
  QStringList out;
  for (int r = 0; r < t->rowCount(); ++r) out << t->item(r, 0)->text() + QStringLiteral(" | ") + t->item(r, 1)->text();
  return out;
}

// `spexlab-cli compare` lines after its "a vs b" header (and the overlap line) as
// "name | value", the way the table splits them.
QStringList cliLines(const QString& out) {
  QStringList lines = out.split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  QStringList rows;
  for (const QString& l : lines) {
    if (l.contains(QLatin1String(" vs ")) || l.startsWith(QLatin1String("compared on the overlap"))) continue;
    rows << l.left(32).trimmed() + QStringLiteral(" | ") + l.mid(32).trimmed();
  }
  return rows;
}

QString runCli(const QStringList& args) {
  QProcess p;
  p.start(QStringLiteral(SPEXLAB_CLI), args);
  if (!p.waitForFinished(600000) || p.exitCode() != 0)
    qWarning("spexlab-cli %s: %s", qPrintable(args.join(QLatin1Char(' '))), p.readAllStandardError().constData());
  return QString::fromUtf8(p.readAllStandardOutput());
}

} // namespace

class GuiResultComparisonTest : public QObject {
  Q_OBJECT
  std::unique_ptr<MainWindow> m_w;
  ComparisonDock* m_dock = nullptr;
  QTemporaryDir m_dir;

  bool extract(bool whole) {
    QSignalSpy done(m_w.get(), &MainWindow::jobFinished);
    if (!m_w->runExtraction(whole)) return false;
    return done.wait(300000);
  }

private slots:
  void initTestCase() {
    m_w = std::make_unique<MainWindow>();
    m_w->setInteractive(false);
    m_w->resize(1400, 1000);
    m_w->show();
    QVERIFY(QTest::qWaitForWindowExposed(m_w.get()));
    QVERIFY(AnalysisDocks::of(m_w.get()));
    m_dock = AnalysisDocks::of(m_w.get())->resultComparisonDock();
    QVERIFY(m_dock);
    // Floating and large: a map cell is then a few screen pixels wide, so a click
    // lands on the bin it aims at.
    m_dock->setFloating(true);
    m_dock->resize(1600, 900);
    m_dock->show();
    m_dock->raise();
  }

  void twoCpuRunsWithOtherParameters() {
    const spextest::SmallSim sim = spextest::makeSmallSim();
    m_w->document()->loadSimulation(sim.psf, sim.sim, QStringLiteral("small test simulation"));
    ViewState* vs = m_w->viewState();
    vs->setSelectedFibers({5, 6, 7});
    QVERIFY(extract(false)); // every patch of fibers 5-7, nwavestep 50
    const auto& runs = AnalysisDocks::of(m_w.get())->runs();
    QCOMPARE(int(runs.size()), 1);
    QVERIFY(runs.back().values); // the run's own numbers (cropped to what it extracted)
    // Copied by the job's worker (ExtractionJob::runValues), not on the GUI thread, and
    // the same numbers as the Document's crop of its result made now.
    QVERIFY(runs.back().values == m_w->job()->runValues(QStringLiteral("cpu")));
    {
      const auto here = m_w->document()->runValues(QStringLiteral("cpu"));
      QVERIFY(here);
      QCOMPARE(runs.back().values->fiberMin, here->fiberMin);
      QCOMPARE(runs.back().values->nwave, here->nwave);
      QVERIFY(runs.back().values->flux.data == here->flux.data);
      QVERIFY(runs.back().values->ivar.data == here->ivar.data);
      QVERIFY(runs.back().values->covered.data == here->covered.data);
      QVERIFY(runs.back().values->resolution.data == here->resolution.data);
    }
    const ExtractionResult first = *runs.back().values; // its numbers, now

    RunSettings s = m_w->document()->settings();
    s.params.nwavestep = 30; // other patches, same grid: the result merges into the first's
    m_w->document()->setSettings(s);
    QVERIFY(extract(false));
    QCOMPARE(int(runs.size()), 2);
    // The first run kept its own numbers although the document's result was merged into.
    QVERIFY(runs[0].values && runs[1].values);
    const ExtractionResult& r1 = *runs[0].values;
    const ExtractionResult& r2 = *runs[1].values;
    // Both runs kept the same spectra and bins (same subbundles, every bin of them).
    QCOMPARE(r1.fiberMin, r2.fiberMin);
    QCOMPARE(r1.nwave, r2.nwave);
    const int o = r1.fiberMin - m_w->document()->plan()->fiberMin; // row of spectrum index 0
    QVERIFY(r1.flux.data == first.flux.data);
    QVERIFY(r1.ivar.data == first.ivar.data);
    long differ = 0;
    for (int f = 5 - o; f <= 7 - o; ++f)
      for (int j = 0; j < r1.nwave; ++j) differ += r1.covered(f, j) && r2.covered(f, j) && r1.flux(f, j) != r2.flux(f, j);
    QVERIFY2(differ > 100, "other patch sizes give other numbers somewhere");

    // Choose the two runs and press Compare.
    const QString a = m_dock->choiceFor(QStringLiteral("last")), b = m_dock->choiceFor(QStringLiteral("previous"));
    QCOMPARE(a, runs[1].label);
    QCOMPARE(b, runs[0].label);
    QVERIFY(m_dock->choose(a, b));
    QTest::mouseClick(m_dock->compareButton(), Qt::LeftButton);
    FrameComparisonView* v = m_dock->view();
    QVERIFY2(v->hasComparison(), qPrintable(v->message()));
    QVERIFY(v->overlapNote().isEmpty()); // same grid and fibers
    const FrameComparison c = compareFrames(r2, r1);
    QCOMPARE(v->comparison().nbins, c.nbins);
    QCOMPARE(v->comparison().maxPull, c.maxPull);
    QCOMPARE(v->comparison().fractionBelow, c.fractionBelow);
    QVERIFY(c.nbins > 0 && c.maxPull > 0);
    QCOMPARE(v->tableText(), QString::fromStdString(c.toText()));
    // The map holds binPull of every bin, and is grey exactly where nothing is compared.
    const PullMapView* map = v->map();
    int grey = 0, coloured = 0;
    for (int f = 0; f < r1.nfiber; ++f)
      for (int j = 0; j < r1.nwave; ++j) {
        const double want = binPull(r2, r1, f, j);
        const int F = f + r1.fiberMin; // spectrum index of row f (runs keep their cropped rows)
        const double got = v->pulls()(F - v->overlap().fiberMin, j);
        QVERIFY(std::isnan(want) ? std::isnan(got) : got == want);
        const bool isGrey = map->cellColor(F, j) == qRgb(200, 200, 200);
        QCOMPARE(isGrey, std::isnan(want));
        (isGrey ? grey : coloured)++;
      }
    QVERIFY(coloured > 0); // grey cells are checked bin by bin above (none when both runs kept the same bins)
    // The σ spectrum shows the selected fiber with exactly those values.
    QVERIFY(v->plottedFibers().contains(7));
    const QVector<double> spec = v->sigmaSpectrum(7);
    for (int j = 0; j < r1.nwave; ++j) {
      const double want = binPull(r2, r1, 7 - r1.fiberMin, j);
      QVERIFY(std::isnan(want) ? std::isnan(spec[j]) : spec[j] == want);
    }

    // Click the cell with the largest |Δ|/σ of fiber 6: it becomes the selection, the
    // CCD centres on it, the spectrum view and the σ spectrum draw that fiber.
    int bin = -1;
    double worst = -1;
    for (int j = 0; j < r1.nwave; ++j)
      if (const double p6 = v->pulls()(6 - v->overlap().fiberMin, j); std::isfinite(p6) && std::abs(p6) > worst) {
        worst = std::abs(p6);
        bin = j;
      }
    QVERIFY(bin >= 0);
    vs->setSelectedFibers({});
    const QPointF at = map->cellRect(6, bin).center();
    QTest::mouseClick(const_cast<PullMapView*>(map), Qt::LeftButton, Qt::NoModifier, at.toPoint());
    QCOMPARE(vs->selectedFiber(), 6);
    const double wave = r1.wave.at(bin);
    QVERIFY(std::abs(vs->selectedWave() - wave) < 1e-9);
    QVERIFY(std::abs(vs->center().x() - sim.psf.x(6, wave)) < 1e-6);
    QVERIFY(std::abs(vs->center().y() - sim.psf.y(6, wave)) < 1e-6);
    QTest::qWait(50);
    QVERIFY(m_w->spectrumView()->fluxGraph(QStringLiteral("cpu"), 6));
    QCOMPARE(v->plottedFibers(), QVector<int>{6});

    // Later runs change the results in place; the comparison shown keeps its numbers.
    const Array2D<double> before = v->pulls();
    s.params.nwavestep = 40;
    m_w->document()->setSettings(s);
    QVERIFY(extract(false));
    QVERIFY(v->pulls().data.size() == before.data.size());
    for (std::size_t i = 0; i < before.data.size(); ++i)
      QVERIFY(std::isnan(before.data[i]) ? std::isnan(v->pulls().data[i]) : v->pulls().data[i] == before.data[i]);
    // "what the views show now" is a choice too: cpu now vs the first run differ
    // where the later runs redid the bins.
    QVERIFY(m_dock->choose(m_dock->choiceFor(QStringLiteral("cpu")), runs[0].label));
    QVERIFY(m_dock->compare());
    QVERIFY(v->comparison().maxPull > 0);
  }

  void mismatchedGridsAreNamed() {
    // Built directly: a grid half a bin off, and another bin width.
    const auto r = AnalysisDocks::of(m_w.get())->runs().front().values;
    ExtractionResult shifted = *r;
    shifted.wave.wmin += 0.5 * shifted.wave.dw;
    FrameComparisonView* v = m_dock->view();
    QVERIFY(!v->compare(QStringLiteral("a"), *r, QStringLiteral("b"), shifted));
    QVERIFY2(v->message().contains(QStringLiteral("offset by 0.5 of a bin")), qPrintable(v->message()));
    QVERIFY(!v->hasComparison());
    ExtractionResult wider = *r;
    wider.wave.dw = 1.0;
    QVERIFY(!v->compare(QStringLiteral("a"), *r, QStringLiteral("b"), wider));
    QVERIFY2(v->message().contains(QStringLiteral("bin widths differ")), qPrintable(v->message()));
    // Whole bins apart: compared on the overlap, and said so.
    ExtractionResult later = cropToOverlap(*r, FrameOverlap{r->fiberMin, r->nfiber, 100, 0, r->nwave - 100, false, {}}, true);
    QVERIFY(v->compare(QStringLiteral("a"), *r, QStringLiteral("b"), later));
    QVERIFY2(v->overlapNote().startsWith(QStringLiteral("compared on the overlap")), qPrintable(v->overlapNote()));
    QCOMPARE(v->overlap().firstBinA, 100);
    QCOMPARE(v->overlap().nwave, r->nwave - 100);
    QCOMPARE(v->comparison().maxPull, 0.0);
  }

  void productionFrameOnTheOverlap() {
    SPEX_REQUIRE_DATA(preproc, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    SPEX_REQUIRE_DATA(psf, "psf-r0-00067784.fits");
    SPEX_REQUIRE_DATA(frame, "sim-r0-bundle0-6000-6500/frame-desispec-bary.fits");
    QVERIFY(m_w->openInputs(QString::fromStdString(preproc), QString::fromStdString(psf)));
    QVERIFY(m_w->openFrame(QString::fromStdString(frame)));
    // Part of the production frame: spectra 0-9 (a bundle's first two sub-bundles).
    RunSettings s = m_w->document()->settings();
    QCOMPARE(s.nFiber, 25);
    s.nFiber = 10;
    s.params = PatchParams{}; // production's patches (nwavestep 50, 5 sub-bundles), not the last test's
    m_w->document()->setSettings(s);
    QVERIFY(extract(true));
    const auto run = AnalysisDocks::of(m_w.get())->runs().back().values;
    QCOMPARE(run->nfiber, 10);
    const QString a = m_dock->choiceFor(QStringLiteral("last")), b = m_dock->choiceFor(QStringLiteral("frame"));
    QVERIFY(!a.isEmpty() && !b.isEmpty());
    QVERIFY(m_dock->choose(a, b));
    QVERIFY(m_dock->compare());
    FrameComparisonView* v = m_dock->view();
    QVERIFY2(v->overlapNote().contains(QStringLiteral("spectra 0-9 (a has 0-9, b has 0-24)")), qPrintable(v->overlapNote()));
    // The numbers are compareFrames' on the two overlapping parts.
    const auto prod = m_w->document()->result(QStringLiteral("frame"));
    const FrameOverlap o = findOverlap(*run, *prod);
    const FrameComparison c = compareFrames(cropToOverlap(*run, o, true), cropToOverlap(*prod, o, false));
    QCOMPARE(v->comparison().nbins, c.nbins);
    QCOMPARE(v->comparison().maxPull, c.maxPull);
    QCOMPARE(v->comparison().fractionBelow, c.fractionBelow);
    long live = 0;
    for (int f = 0; f < 10; ++f)
      for (int j = 0; j < prod->nwave; ++j) live += prod->ivar(f, j) > 0 && run->ivar(f, j) > 0;
    QCOMPARE(v->comparison().nbins, live);
    QVERIFY(v->comparison().maxPullFiber >= 0 && v->comparison().maxPullFiber <= 9);
    // Spectra 0-9 are the bundle's first two sub-bundles, the patches production
    // solved too: within 0.001 σ everywhere, as docs/desi.md measures for the bundle
    // (4.1e-4 σ at most there); a wrong overlap (rows or bins shifted) gives many σ.
    QVERIFY2(c.maxPull < 1e-3, qPrintable(v->tableText()));
  }

  void tableReadsAsTheCli() {
    SPEX_REQUIRE_DATA(preproc, "sim-r0-bundle0-6000-6500/preproc.fits.gz");
    SPEX_REQUIRE_DATA(psf, "psf-r0-00067784.fits");
    SPEX_REQUIRE_DATA(gpuSpecter, "sim-r0-bundle0-6000-6500/frame-gpu_specter.fits");
    SPEX_REQUIRE_DATA(desispec, "sim-r0-bundle0-6000-6500/frame-desispec-bary.fits");
    // Our frame of spectra 0-9, written by spexlab-cli as a pipeline would.
    const QString ours = m_dir.filePath(QStringLiteral("ours.fits"));
    runCli({QStringLiteral("extract"), QStringLiteral("-i"), QString::fromStdString(preproc), QStringLiteral("-p"),
            QString::fromStdString(psf), QStringLiteral("-o"), ours, QStringLiteral("-w"), QStringLiteral("6000,6500,0.8"),
            QStringLiteral("-s"), QStringLiteral("0"), QStringLiteral("-n"), QStringLiteral("10"),
            QStringLiteral("--engine"), QStringLiteral("cpu"), QStringLiteral("--threads"), QStringLiteral("2")});
    QVERIFY(QFile::exists(ours));
    const QString gs = QString::fromStdString(gpuSpecter);

    // Same files, same numbers: gpu_specter's frame against itself cropped by us is
    // not a file, so compare the two files both tools can read.
    QVERIFY(m_dock->openFrameFile(gs));
    const QString gsLabel = m_dock->choiceB();
    QVERIFY(m_dock->openFrameFile(ours));
    const QString oursLabel = m_dock->choiceB();
    QVERIFY(m_dock->choose(oursLabel, gsLabel));
    QVERIFY(m_dock->compare());
    FrameComparisonView* v = m_dock->view();
    const QString cli = runCli({QStringLiteral("compare"), QStringLiteral("--overlap"), ours, gs});
    QVERIFY2(cli.contains(QStringLiteral("bins compared")), qPrintable(cli));
    QCOMPARE(tableLines(v->table()), cliLines(cli));
    QVERIFY2(cli.contains(v->overlapNote()), qPrintable(cli + QStringLiteral("\n") + v->overlapNote()));
    QVERIFY(!v->overlapNote().isEmpty());
    // Without --overlap the CLI refuses what the workbench compares on the overlap.
    QVERIFY(!runCli({QStringLiteral("compare"), ours, gs}).contains(QStringLiteral("bins compared")));

    // The same file on both sides: the CLI's exact agreement, in the table.
    QVERIFY(m_dock->choose(gsLabel, gsLabel));
    QVERIFY(m_dock->compare());
    QCOMPARE(tableLines(v->table()), cliLines(runCli({QStringLiteral("compare"), gs, gs})));
    QCOMPARE(v->comparison().maxPull, 0.0);

    // desispec's barycentric-corrected frame sits on another grid than an
    // uncorrected one: refused, naming HELIOCOR.
    QVERIFY(m_dock->openFrameFile(QString::fromStdString(desispec)));
    QVERIFY(m_dock->choose(gsLabel, m_dock->choiceB()));
    QVERIFY(!m_dock->compare());
    QVERIFY2(v->message().contains(QStringLiteral("HELIOCOR")), qPrintable(v->message()));
    // A file that is not a frame: its name and the reason.
    const QString bogus = m_dir.filePath(QStringLiteral("not-a-frame.fits"));
    QFile f(bogus);
    QVERIFY(f.open(QIODevice::WriteOnly));
    f.write("SIMPLE  = nonsense");
    f.close();
    QVERIFY(!m_dock->openFrameFile(bogus));
    QVERIFY2(v->message().contains(QStringLiteral("not-a-frame.fits")), qPrintable(v->message()));
  }

  void cudaChoiceSaysWhyWithoutAGpu() {
    if (m_w->cudaUsable()) QSKIP("a usable GPU is present: CUDA runs are real choices here");
    // A disabled line that says why, in both boxes; the note offers what can be compared.
    for (QComboBox* box : {m_dock->boxA(), m_dock->boxB()}) {
      int line = -1;
      for (int i = 0; i < box->count(); ++i)
        if (box->itemText(i).startsWith(QStringLiteral("cuda: not available here"))) line = i;
      QVERIFY(line >= 0);
      auto* model = qobject_cast<QStandardItemModel*>(box->model());
      QVERIFY(model && !model->item(line)->isEnabled());
    }
    QVERIFY(m_dock->cudaNote()->isVisibleTo(m_dock));
    QVERIFY2(m_dock->cudaNote()->text().contains(QStringLiteral("opened frame")), qPrintable(m_dock->cudaNote()->text()));
    QVERIFY(!m_dock->cudaNote()->text().contains(QStringLiteral("--")));
    // The CPU vs CUDA dock: its button greyed, the others offered, one click away.
    QDockWidget* engineDock = AnalysisDocks::of(m_w.get())->engineComparisonDock();
    auto* others = engineDock->findChild<QPushButton*>(QStringLiteral("compareOtherResults"));
    QVERIFY(others);
    for (QPushButton* b : engineDock->findChildren<QPushButton*>())
      if (b->text().contains(QStringLiteral("CUDA"))) QVERIFY(!b->isEnabled());
    QVERIFY(AnalysisDocks::of(m_w.get())->engineComparison()->message().contains(QStringLiteral("another CPU run")));
    engineDock->show();
    engineDock->raise();
    QTest::mouseClick(others, Qt::LeftButton);
    QTest::qWait(20);
    QVERIFY(m_dock->isVisible());
  }
};

QTEST_MAIN(GuiResultComparisonTest)
#include "gui_result_comparison_test.moc"
