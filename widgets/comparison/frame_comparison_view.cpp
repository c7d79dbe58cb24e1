#include "frame_comparison_view.h"

#include "pull_map_view.h"

#include "../agreement_table.h"
#include "../view_state.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>

namespace spex {

namespace {
// The spectrum view's fiber colours, so a fiber looks the same in both.
const QColor kFiberColors[] = {QColor(31, 119, 180), QColor(214, 39, 40),  QColor(44, 160, 44),
                               QColor(148, 103, 189), QColor(255, 127, 14), QColor(23, 190, 207),
                               QColor(140, 86, 75),  QColor(227, 119, 194)};
constexpr int kMaxPlotted = 8;
// FrameComparison::toText's layout: the name in the first 32 columns, a space, the value.
constexpr int kNameWidth = 32;
} // namespace

FrameComparisonView::FrameComparisonView(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  m_title = new QLabel(tr("Choose two results and press Compare."));
  m_title->setWordWrap(true);
  m_title->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_note = new QLabel;
  m_note->setObjectName(QStringLiteral("overlapNote"));
  m_note->setWordWrap(true);
  m_note->setStyleSheet(QStringLiteral("color: #8a5a00;"));
  m_note->hide();

  m_map = new PullMapView;
  connect(m_map, &PullMapView::cellClicked, this, &FrameComparisonView::selectCell);
  connect(m_map, &PullMapView::hovered, this, &FrameComparisonView::hovered);

  m_plot = new QCustomPlot;
  m_plot->setMinimumHeight(120);
  m_plot->xAxis->setLabel(tr("wavelength [\u00c5]"));
  m_plot->yAxis->setLabel(tr("(a \u2212 b) / \u03c3"));
  m_plot->legend->setVisible(true);
  m_plot->legend->setFont(font());
  m_plot->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignRight);
  m_cursor = new QCPItemStraightLine(m_plot);
  m_cursor->setPen(QPen(QColor(230, 160, 0), 1.5));
  m_cursor->setVisible(false);

  m_table = makeAgreementTable();

  auto* left = new QSplitter(Qt::Vertical);
  left->addWidget(m_map);
  left->addWidget(m_plot);
  left->setStretchFactor(0, 3);
  left->setStretchFactor(1, 2);
  auto* split = new QSplitter(Qt::Horizontal);
  split->addWidget(left);
  split->addWidget(m_table);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 1);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_title);
  lay->addWidget(m_note);
  lay->addWidget(split, 1);

  connect(m_state, &ViewState::fibersChanged, this, [this] {
    updatePlot();
    updateMarker();
  });
  connect(m_state, &ViewState::waveChanged, this, &FrameComparisonView::updateMarker);
}

QString FrameComparisonView::message() const { return m_title->text(); }
QString FrameComparisonView::overlapNote() const { return m_note->text(); }

void FrameComparisonView::showMessage(const QString& message) {
  m_comparison.reset();
  m_pulls = {};
  m_overlap = {};
  m_worstFiber = -1;
  m_plotted.clear();
  m_title->setText(message);
  m_note->clear();
  m_note->hide();
  m_map->clear();
  m_table->setRowCount(0);
  m_plot->clearGraphs();
  m_cursor->setVisible(false);
  m_plot->replot();
}

bool FrameComparisonView::compare(const QString& labelA, const ExtractionResult& a, const QString& labelB,
                                  const ExtractionResult& b) {
  FrameOverlap o;
  FrameComparison c;
  Array2D<double> pulls;
  ExtractionResult ca, cb; // the overlap's parts, only when cropping is needed
  try {
    o = findOverlap(a, b);
    const ExtractionResult& ra = o.whole ? a : (ca = cropToOverlap(a, o, true));
    const ExtractionResult& rb = o.whole ? b : (cb = cropToOverlap(b, o, false));
    c = compareFrames(ra, rb);
    pulls = pullMap(ra, rb);
    m_grid = ra.wave;
    QVector<int> labels;
    for (int s = 0; s < ra.nfiber; ++s)
      labels.push_back(!ra.fibers.empty()   ? ra.fiberNumber(s)
                       : !rb.fibers.empty() ? rb.fiberNumber(s)
                                            : m_state->fiberNumber(ra.fiberMin + s));
    m_map->setMap(pulls, o.fiberMin, ra.wave, labels);
  } catch (const std::exception& e) {
    showMessage(tr("%1 and %2 cannot be compared: %3").arg(labelA, labelB, QString::fromStdString(e.what())));
    return false;
  }
  m_overlap = o;
  m_comparison = c;
  m_pulls = std::move(pulls);
  m_labelA = labelA;
  m_labelB = labelB;
  // The spectrum with the largest |Δ|/σ, shown when no selected fiber is compared.
  double worst = -1;
  m_worstFiber = o.fiberMin;
  for (int s = 0; s < m_pulls.rows; ++s)
    for (int j = 0; j < m_pulls.cols; ++j) {
      const double v = std::abs(m_pulls(s, j));
      if (!std::isnan(v) && v > worst) {
        worst = v;
        m_worstFiber = o.fiberMin + s;
      }
    }
  m_title->setText(tr("<b>a</b> = %1 &nbsp; <b>b</b> = %2: %3 bins compared, max |\u0394|/\u03c3 %4")
                       .arg(labelA.toHtmlEscaped(), labelB.toHtmlEscaped())
                       .arg(c.nbins)
                       .arg(c.maxPullFiber >= 0 ? QString::number(c.maxPull, 'g', 3) : QStringLiteral("-")));
  m_note->setText(o.whole ? QString() : QString::fromStdString(o.description));
  m_note->setVisible(!o.whole);
  fillTable();
  updatePlot();
  updateMarker();
  return true;
}

QString FrameComparisonView::tableText() const {
  return m_comparison ? QString::fromStdString(m_comparison->toText()) : QString();
}

void FrameComparisonView::fillTable() {
  // The rows are FrameComparison::toText's lines, split into name and value, so the
  // table reads exactly as `spexlab-cli compare` prints.
  const QStringList lines = tableText().split(QLatin1Char('\n'), Qt::SkipEmptyParts);
  std::vector<AgreementRow> rows;
  for (const QString& line : lines) rows.push_back({line.left(kNameWidth).trimmed(), line.mid(kNameWidth).trimmed()});
  setAgreementRows(m_table, rows);
  // Every line whole: as wide as its contents.
  m_table->resizeColumnsToContents();
  m_table->setMinimumWidth(m_table->horizontalHeader()->length() + 2 * m_table->frameWidth() + 4);
}

QVector<double> FrameComparisonView::sigmaSpectrum(int fiber) const {
  const int s = fiber - m_overlap.fiberMin;
  QVector<double> out;
  if (!m_comparison || s < 0 || s >= m_pulls.rows) return out;
  out.resize(m_pulls.cols);
  for (int j = 0; j < m_pulls.cols; ++j) out[j] = m_pulls(s, j);
  return out;
}

void FrameComparisonView::updatePlot() {
  m_plot->clearGraphs();
  m_plotted.clear();
  if (!m_comparison) {
    m_plot->replot();
    return;
  }
  for (int f : m_state->selectedFibers())
    if (f >= m_overlap.fiberMin && f < m_overlap.fiberMin + m_overlap.nfiber && m_plotted.size() < kMaxPlotted)
      m_plotted.push_back(f);
  const bool worst = m_plotted.isEmpty();
  if (worst) m_plotted.push_back(m_worstFiber);
  double lim = 0;
  for (int i = 0; i < m_plotted.size(); ++i) {
    const QVector<double> p = sigmaSpectrum(m_plotted[i]);
    QVector<double> x, y;
    for (int j = 0; j < p.size(); ++j) {
      if (std::isnan(p[j])) continue; // a gap: not compared
      x.push_back(m_grid.at(j));
      y.push_back(p[j]);
      if (std::isfinite(p[j])) lim = std::max(lim, std::abs(p[j]));
    }
    QCPGraph* g = m_plot->addGraph();
    g->setPen(QPen(kFiberColors[i % kMaxPlotted], 1.2));
    g->setLineStyle(QCPGraph::lsStepCenter);
    g->setData(x, y, true);
    const int label = m_state->fiberNumber(m_plotted[i]);
    g->setName(worst ? tr("fiber %1 (largest |\u0394|/\u03c3; click the map to choose)").arg(label)
                     : tr("fiber %1").arg(label));
  }
  m_plot->xAxis->setRange(m_grid.wmin, m_grid.last());
  lim = lim > 0 ? lim * 1.1 : 1e-6;
  m_plot->yAxis->setRange(-lim, lim);
  updateMarker();
}

void FrameComparisonView::updateMarker() {
  const double w = m_state->selectedWave();
  m_map->setMarker(m_state->selectedFiber(), w);
  const bool show = m_comparison && std::isfinite(w);
  m_cursor->setVisible(show);
  if (show) {
    m_cursor->point1->setCoords(w, 0);
    m_cursor->point2->setCoords(w, 1);
  }
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void FrameComparisonView::selectCell(int fiber, double wave) {
  // One selection for every view: the spectrum view shows the fiber, the CCD centres
  // on the spot (keeping its zoom).
  m_state->selectFiber(fiber);
  m_state->setSelectedWave(wave);
  if (m_psf && fiber >= 0 && fiber < m_psf->nfiber)
    m_state->setCenter(QPointF(m_psf->x(fiber, wave), m_psf->y(fiber, wave)));
}

} // namespace spex
