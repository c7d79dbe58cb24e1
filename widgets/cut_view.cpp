#include "cut_view.h"

#include "view_state.h"

#include <qcustomplot.h>

#include <QLabel>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>

namespace spex {

double sampleBilinear(const Array2D<double>& a, double x, double y) {
  if (a.empty() || !(x >= 0) || !(y >= 0) || x > a.cols - 1 || y > a.rows - 1)
    return std::numeric_limits<double>::quiet_NaN();
  const int c0 = std::min(int(x), a.cols - 2 < 0 ? 0 : a.cols - 2);
  const int r0 = std::min(int(y), a.rows - 2 < 0 ? 0 : a.rows - 2);
  const int c1 = std::min(c0 + 1, a.cols - 1), r1 = std::min(r0 + 1, a.rows - 1);
  const double fx = x - c0, fy = y - r0;
  return (1 - fy) * ((1 - fx) * a(r0, c0) + fx * a(r0, c1)) + fy * ((1 - fx) * a(r1, c0) + fx * a(r1, c1));
}

CutView::CutView(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  m_label = new QLabel(this);
  m_label->setWordWrap(true);
  m_plot = new QCustomPlot(this);
  m_plot->setObjectName(QStringLiteral("cutPlot"));
  m_plot->setPlottingHint(QCP::phImmediateRefresh, false); // see SpectrumView
  m_plot->xAxis->setLabel(tr("distance along the cut [px]"));
  m_plot->yAxis->setLabel(tr("e\u207b per pixel"));
  // The legend has its own row above the plot: the fiber labels along the top of the
  // axis rect stay readable.
  m_plot->plotLayout()->insertRow(0);
  auto* legend = new QCPLegend;
  m_plot->plotLayout()->addElement(0, 0, legend);
  m_plot->plotLayout()->setRowStretchFactor(0, 0.001);
  legend->setLayer(QStringLiteral("legend"));
  legend->setFont(QFont(font().family(), 8));
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  legend->setBorderPen(Qt::NoPen);
  legend->setMargins(QMargins(2, 1, 2, 1));
  m_plot->legend = legend;
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->setMinimumHeight(160);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_label);
  lay->addWidget(m_plot, 1);
  recompute();
}

void CutView::setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                        const QString& modelName) {
  if (model && image && (model->rows != image->ny || model->cols != image->nx)) model.reset();
  m_image = std::move(image);
  m_modelImage = std::move(model);
  m_modelName = modelName;
  recompute();
}

void CutView::setTraces(const TraceGeometry* traces) {
  m_traces = traces;
  recompute();
}

void CutView::setCut(const QLineF& ccd) {
  m_cut = ccd;
  recompute();
}

void CutView::recompute() {
  // Without a cut there is nothing to sample: when the empty state with the same
  // message is what is shown already (a model change, every extraction), no replot.
  const bool none = !m_image || m_cut.isNull() || m_cut.length() < 1;
  if (none && m_shownEmpty && m_shownEmptyImage == bool(m_image)) return;
  m_shownEmpty = none;
  m_shownEmptyImage = bool(m_image);
  m_dist.clear();
  m_data.clear();
  m_model.clear();
  m_crossings.clear();
  m_plot->clearGraphs();
  m_plot->clearItems();
  if (!m_image || m_cut.isNull() || m_cut.length() < 1) {
    m_label->setText(m_image ? tr("Draw a line across the traces on the CCD (the Cut tool, X) to plot the "
                                  "data and model along it.")
                             : tr("Nothing is open."));
    m_plot->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  const double len = m_cut.length();
  const int n = int(std::floor(len / kStep)) + 1;
  const QPointF p0 = m_cut.p1(), d = (m_cut.p2() - m_cut.p1()) / len;
  for (int i = 0; i < n; ++i) {
    const double s = i * kStep;
    const QPointF p = p0 + s * d;
    m_dist << s;
    m_data << sampleBilinear(m_image->pix, p.x(), p.y());
    if (m_modelImage) m_model << sampleBilinear(*m_modelImage, p.x(), p.y());
  }
  // Trace crossings: where x(s) - x_trace(y(s)) changes sign along the cut.
  if (m_traces && !m_traces->empty()) {
    const QRectF span = QRectF(m_cut.p1(), m_cut.p2()).normalized().adjusted(-1, -1, 1, 1);
    for (int f = 0; f < m_traces->nfiber(); ++f) {
      if (!m_traces->bounds(f).intersects(span)) continue;
      double prev = std::numeric_limits<double>::quiet_NaN();
      for (int i = 0; i < n; ++i) {
        const QPointF p = p0 + m_dist[i] * d;
        const double g = p.x() - m_traces->xAtRow(f, p.y());
        if (std::isfinite(prev) && std::isfinite(g) && (prev <= 0) != (g <= 0)) {
          const double t = prev / (prev - g);
          m_crossings.push_back({m_dist[i - 1] + t * kStep, f});
        }
        prev = g;
      }
    }
    std::sort(m_crossings.begin(), m_crossings.end());
  }

  QCPGraph* data = m_plot->addGraph();
  data->setName(tr("data"));
  data->setData(m_dist, m_data, true);
  data->setPen(QPen(QColor(30, 30, 30), 1.3));
  if (!m_model.isEmpty()) {
    QCPGraph* model = m_plot->addGraph();
    model->setName(tr("model (%1)").arg(m_modelName));
    model->setData(m_dist, m_model, true);
    model->setPen(QPen(QColor(210, 40, 40), 1.5));
  }
  m_plot->rescaleAxes();
  QCPRange y = m_plot->yAxis->range();
  m_plot->yAxis->setRange(y.lower - 0.05 * y.size(), y.upper + 0.12 * y.size()); // room for fiber labels
  // Fiber marks: a dotted line at each crossing, labelled with the FIBER number; when
  // many traces are crossed, every k-th is labelled so the numbers never overlap.
  // Labels about 22 screen px apart at least.
  const double plotPx = m_plot->axisRect()->width() > 50 ? m_plot->axisRect()->width() : std::max(100, m_plot->width() - 70);
  const double pxPerCrossing = m_crossings.size() > 1 ? plotPx * (m_crossings.last().first - m_crossings.first().first) /
                                                            (len * (m_crossings.size() - 1))
                                                      : plotPx;
  const int every = std::max(1, int(std::ceil(22.0 / std::max(pxPerCrossing, 1e-3))));
  for (int i = 0; i < m_crossings.size(); ++i) {
    const auto [s, f] = m_crossings[i];
    auto* line = new QCPItemStraightLine(m_plot);
    line->point1->setCoords(s, 0);
    line->point2->setCoords(s, 1);
    line->setPen(QPen(QColor(0, 140, 200, 140), 1, Qt::DotLine));
    if (i % every) continue;
    auto* label = new QCPItemText(m_plot);
    label->position->setTypeY(QCPItemPosition::ptAxisRectRatio);
    label->position->setCoords(s, 0.02);
    label->setPositionAlignment(Qt::AlignHCenter | Qt::AlignTop);
    label->setText(QString::number(m_state ? m_state->fiberNumber(f) : f));
    label->setColor(QColor(0, 110, 170));
    label->setFont(QFont(font().family(), 8));
  }
  m_label->setText(tr("Cut (%1, %2) \u2192 (%3, %4): %5 px, crosses %6 trace(s)%7")
                       .arg(m_cut.x1(), 0, 'f', 1)
                       .arg(m_cut.y1(), 0, 'f', 1)
                       .arg(m_cut.x2(), 0, 'f', 1)
                       .arg(m_cut.y2(), 0, 'f', 1)
                       .arg(len, 0, 'f', 1)
                       .arg(m_crossings.size())
                       .arg(m_modelImage ? QString() : tr("; no model yet")));
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace spex
