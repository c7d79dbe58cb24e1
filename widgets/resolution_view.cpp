#include "resolution_view.h"

#include "colormap.h"

#include <qcustomplot.h>

#include <QLabel>
#include <QVBoxLayout>

#include <cmath>

namespace spex {

ResolutionView::ResolutionView(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  m_title = new QLabel(this);
  m_kernel = new QCustomPlot(this);
  m_kernel->setObjectName(QStringLiteral("resolutionKernel"));
  m_kernel->setPlottingHint(QCP::phImmediateRefresh, false); // see SpectrumView
  m_kernel->xAxis->setLabel(tr("bin offset"));
  m_kernel->yAxis->setLabel(tr("R weight"));
  m_kernel->legend->setVisible(true);
  m_kernel->legend->setFont(QFont(font().family(), 8));
  m_diag = new QCustomPlot(this);
  m_diag->setObjectName(QStringLiteral("resolutionDiagonals"));
  m_diag->setPlottingHint(QCP::phImmediateRefresh, false);
  m_diag->xAxis->setLabel(QStringLiteral("wavelength [\u00c5]"));
  m_diag->yAxis->setLabel(tr("diagonal offset"));
  m_map = new QCPColorMap(m_diag->xAxis, m_diag->yAxis);
  QCPColorGradient grad;
  grad.clearColorStops();
  for (int i = 0; i <= 8; ++i) grad.setColorStopAt(i / 8.0, colormapColor(Colormap::Viridis, i / 8.0));
  grad.setNanHandling(QCPColorGradient::nhTransparent); // bins not extracted
  m_map->setGradient(grad);
  m_map->setInterpolate(false);
  auto* scale = new QCPColorScale(m_diag);
  m_diag->plotLayout()->addElement(0, 1, scale);
  m_map->setColorScale(scale);
  m_diag->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_diag->axisRect()->setRangeDrag(Qt::Horizontal);
  m_diag->axisRect()->setRangeZoom(Qt::Horizontal);

  m_hint = new QLabel(this);
  m_hint->setObjectName(QStringLiteral("resolutionHint"));
  m_hint->setAlignment(Qt::AlignCenter);
  m_hint->setWordWrap(true);
  m_hint->setStyleSheet(QStringLiteral("color: #555; font-size: 11pt; padding: 12px;"));
  m_hint->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
  m_hint->setText(tr("The resolution matrix of an extracted fiber shows here.\n\nClick a fiber trace on the "
                     "CCD, press \u201cExtract selection\u201d (Ctrl+R), then click a wavelength on the CCD or "
                     "in the spectrum to see its row of R."));

  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_title);
  lay->addWidget(m_kernel, 1);
  lay->addWidget(m_diag, 1);
  lay->addWidget(m_hint, 1);
  refresh();

  connect(m_state, &ViewState::fibersChanged, this, &ResolutionView::refresh);
  connect(m_state, &ViewState::waveChanged, this, &ResolutionView::refresh);
}

void ResolutionView::setSources(const QVector<SpectrumSource>& sources) {
  m_sources = sources;
  refresh();
}

QVector<double> ResolutionView::kernel(const ExtractionResult& r, int fiber, double wave, int* binOut) {
  const int row = fiber - r.fiberMin;
  if (row < 0 || row >= r.nfiber || r.resolution.empty() || !std::isfinite(wave)) return {};
  const int i = int(std::lround((wave - r.wave.wmin) / r.wave.dw));
  if (i < 0 || i >= r.nwave) return {};
  if (!r.covered.empty() && !r.covered(row, i)) return {};
  if (binOut) *binOut = i;
  const int nd = r.ndiag;
  QVector<double> k(2 * nd + 1, 0.0);
  for (int d = -nd; d <= nd; ++d) {
    const int j = i + d;
    if (j < 0 || j >= r.nwave) continue;
    k[d + nd] = r.resolution(row, nd - d, j);
  }
  return k;
}

void ResolutionView::refresh() {
  m_kernel->clearGraphs();
  const int fiber = m_state->selectedFiber();
  const double wave = m_state->selectedWave();
  static const QColor colors[] = {QColor(31, 119, 180), QColor(214, 39, 40), QColor(44, 160, 44)};
  int bin = -1;
  const ExtractionResult* first = nullptr;
  for (int s = 0; s < m_sources.size(); ++s) {
    if (!m_sources[s].result) continue;
    const ExtractionResult& r = *m_sources[s].result;
    const QVector<double> k = kernel(r, fiber, wave, &bin);
    if (k.isEmpty()) continue;
    if (!first) first = &r;
    QVector<double> x(k.size());
    for (int i = 0; i < k.size(); ++i) x[i] = i - r.ndiag;
    QCPGraph* g = m_kernel->addGraph();
    g->setData(x, k, true);
    g->setName(QString::fromStdString(m_sources[s].name));
    g->setPen(QPen(colors[s % 3], 1.5, s ? Qt::DashLine : Qt::SolidLine));
    g->setLineStyle(QCPGraph::lsStepCenter);
    g->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCircle, 5));
  }
  m_kernel->rescaleAxes();
  m_kernel->legend->setVisible(m_kernel->graphCount() > 0);
  m_kernel->replot(QCustomPlot::rpQueuedReplot);

  // Diagonals image of the first source holding the fiber.
  const ExtractionResult* r = first;
  if (!r)
    for (const auto& s : m_sources)
      if (s.result && fiber - s.result->fiberMin >= 0 && fiber - s.result->fiberMin < s.result->nfiber &&
          !s.result->resolution.empty()) {
        r = s.result.get();
        break;
      }
  if (r && fiber >= 0) {
    const int row = fiber - r->fiberMin;
    const int nd = r->ndiag, nw = r->nwave;
    m_map->data()->setSize(nw, 2 * nd + 1);
    m_map->data()->setRange(QCPRange(r->wave.at(0), r->wave.at(nw - 1)), QCPRange(-nd, nd));
    double lo = 0, hi = 0;
    for (int j = 0; j < nw; ++j)
      for (int k = 0; k <= 2 * nd; ++k) {
        const bool c = r->covered.empty() || r->covered(row, j);
        // Row k of RESOLUTION is offset nd - k (dia_matrix order).
        const double v = c ? r->resolution(row, k, j) : std::nan("");
        m_map->data()->setCell(j, 2 * nd - k, v);
        if (c) {
          lo = std::min(lo, v);
          hi = std::max(hi, v);
        }
      }
    // Our own bounds: QCustomPlot's rescale trips over the NaN of unextracted bins.
    m_map->setDataRange(QCPRange(lo, hi > lo ? hi : lo + 1));
    m_diag->rescaleAxes();
    // Zoom the wavelength axis on the extracted part of this fiber.
    int j0 = -1, j1 = -1;
    for (int j = 0; j < nw; ++j)
      if (r->covered.empty() || r->covered(row, j)) {
        if (j0 < 0) j0 = j;
        j1 = j;
      }
    if (j0 >= 0) m_diag->xAxis->setRange(r->wave.at(j0) - r->wave.dw, r->wave.at(j1) + r->wave.dw);
    m_title->setText(bin >= 0 ? tr("fiber %1, bin %2 (%3 \u00c5)").arg(m_state->fiberNumber(fiber)).arg(bin).arg(r->wave.at(bin), 0, 'f', 2)
                              : tr("fiber %1: click the CCD or the spectrum to pick a wavelength").arg(m_state->fiberNumber(fiber)));
  } else {
    m_map->data()->clear();
    m_title->setText(tr("Select an extracted fiber to see its resolution matrix."));
  }
  const bool empty = !(r && fiber >= 0) && m_kernel->graphCount() == 0;
  m_hint->setVisible(empty);
  m_kernel->setVisible(!empty);
  m_diag->setVisible(!empty);
  m_title->setVisible(!empty);
  m_diag->replot(QCustomPlot::rpQueuedReplot);
}

QString ResolutionView::emptyHint() const { return m_hint->isVisibleTo(this) ? m_hint->text() : QString(); }

} // namespace spex
