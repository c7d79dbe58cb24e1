#include "engine_comparison_view.h"

#include "../agreement_table.h"
#include "../colormap.h"

#include <QEvent>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QSplitter>
#include <QTableWidget>
#include <QVBoxLayout>
#include <qcustomplot.h>

#include <algorithm>
#include <cmath>
#include <vector>

namespace spex {

EngineComparisonView::EngineComparisonView(QWidget* parent) : QWidget(parent) {
  m_title = new QLabel(tr("Run both engines to compare them."));
  m_title->setWordWrap(true);
  m_fiberBox = new QSpinBox;
  m_fiberBox->setPrefix(tr("fiber "));
  m_fiberBox->setEnabled(false);
  connect(m_fiberBox, &QSpinBox::valueChanged, this, [this](int f) { setFiber(f); });

  m_plot = new QCustomPlot;
  m_plot->setMinimumHeight(140);
  m_plot->addGraph();
  m_plot->graph(0)->setPen(QPen(QColor(40, 90, 200)));
  m_plot->graph(0)->setLineStyle(QCPGraph::lsStepCenter);
  m_plot->xAxis->setLabel(tr("wavelength [\u00c5]"));
  m_plot->yAxis->setLabel(tr("(a \u2212 b) / \u03c3"));

  m_image = new QLabel;
  m_image->setMinimumSize(120, 120);
  m_image->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Ignored);
  m_image->installEventFilter(this);
  m_image->setAlignment(Qt::AlignCenter);
  m_imageCaption = new QLabel;
  m_imageCaption->setWordWrap(true);

  m_table = makeAgreementTable();

  auto* top = new QHBoxLayout;
  top->addWidget(m_title, 1);
  top->addWidget(m_fiberBox);
  auto* imageBox = new QWidget;
  auto* il = new QVBoxLayout(imageBox);
  il->setContentsMargins(0, 0, 0, 0);
  il->addWidget(m_image, 1);
  il->addWidget(m_imageCaption);
  auto* lower = new QSplitter(Qt::Horizontal);
  lower->addWidget(m_table);
  lower->addWidget(imageBox);
  m_table->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
  imageBox->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);
  lower->setStretchFactor(0, 1);
  lower->setStretchFactor(1, 1);
  auto* split = new QSplitter(Qt::Vertical);
  split->addWidget(m_plot);
  split->addWidget(lower);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(top);
  lay->addWidget(split, 1);
}

QVector<double> EngineComparisonView::pullSpectrum(const ExtractionResult& a, const ExtractionResult& b,
                                                   int fiber) {
  QVector<double> out(a.nwave, std::nan(""));
  const int s = fiber - a.fiberMin;
  if (s < 0 || s >= a.nfiber || a.nfiber != b.nfiber || a.nwave != b.nwave || a.fiberMin != b.fiberMin)
    return out;
  for (int j = 0; j < a.nwave; ++j) out[j] = binPull(a, b, s, j); // compareFrames' rule
  return out;
}

void EngineComparisonView::showMessage(const QString& message) {
  m_a.reset();
  m_b.reset();
  m_comparison.reset();
  m_wallA = m_wallB = 0;
  m_diffImage = QImage();
  m_title->setText(message);
  m_table->setRowCount(0);
  m_plot->graph(0)->data()->clear();
  m_plot->replot();
  m_image->clear();
  m_imageCaption->clear();
  m_fiberBox->setEnabled(false);
}

QString EngineComparisonView::message() const { return m_title->text(); }

void EngineComparisonView::setResults(std::shared_ptr<const ExtractionResult> a,
                                      std::shared_ptr<const ExtractionResult> b, double wallA,
                                      double wallB) {
  if (!a || !b) {
    showMessage(tr("Two results are needed for a comparison."));
    return;
  }
  FrameComparison c;
  try {
    c = compareFrames(*a, *b);
  } catch (const std::exception& e) {
    showMessage(QString::fromStdString(e.what()));
    return;
  }
  m_a = std::move(a);
  m_b = std::move(b);
  m_comparison = c;
  m_wallA = wallA > 0 ? wallA : m_a->profile.wallNs * 1e-9;
  m_wallB = wallB > 0 ? wallB : m_b->profile.wallNs * 1e-9;
  m_title->setText(tr("<b>%1</b> vs <b>%2</b>: %3 bins compared, max |\u0394|/\u03c3 %4, speed-up %5\u00d7")
                       .arg(QString::fromStdString(m_a->engine), QString::fromStdString(m_b->engine))
                       .arg(c.nbins)
                       .arg(c.maxPull, 0, 'g', 3)
                       .arg(speedup(), 0, 'f', 2));
  fillTable();
  // Start on the fiber with the largest disagreement: that is what one wants to see.
  const QSignalBlocker block(m_fiberBox);
  m_fiberBox->setRange(m_a->fiberMin, m_a->fiberMin + m_a->nfiber - 1);
  m_fiberBox->setEnabled(true);
  m_fiber = -1;
  setFiber(c.maxPullFiber >= 0 ? c.maxPullFiber : m_a->fiberMin);
  updateDifferenceImage();
}

void EngineComparisonView::fillTable() {
  const FrameComparison& c = *m_comparison;
  // Texts formatted as FrameComparison::toText (what `spexlab-cli compare` prints);
  // Qt::UserRole holds the number itself.
  std::vector<AgreementRow> rows;
  rows.push_back({tr("bins compared (both ivar > 0)"), QString::number(c.nbins), double(c.nbins)});
  for (std::size_t t = 0; t < c.kThresholds.size(); ++t)
    rows.push_back({QString::asprintf("|fa-fb|/sigma < %g", c.kThresholds[t]),
                    QString::asprintf("%.6f", c.fractionBelow[t]), c.fractionBelow[t]});
  rows.push_back({tr("max |fa-fb|/sigma"),
                  c.maxPullFiber >= 0 ? QString::asprintf("%.6g (fiber %d, bin %d)", c.maxPull, c.maxPullFiber,
                                                          c.maxPullBin)
                                      : QStringLiteral("-"),
                  c.maxPull});
  rows.push_back({tr("max |ia-ib|/max(ia,ib)"), QString::asprintf("%.6g", c.maxRelIvar), c.maxRelIvar});
  rows.push_back({tr("max |Ra-Rb|"), QString::asprintf("%.6g", c.maxResolution), c.maxResolution});
  rows.push_back({tr("bins with different MASK"), QString::number(c.maskDifferences), double(c.maskDifferences)});
  rows.push_back({tr("wall %1").arg(QString::fromStdString(m_a->engine)), QString::asprintf("%.4f s", m_wallA), m_wallA});
  rows.push_back({tr("wall %1").arg(QString::fromStdString(m_b->engine)), QString::asprintf("%.4f s", m_wallB), m_wallB});
  rows.push_back({tr("speed-up %1 / %2").arg(QString::fromStdString(m_b->engine), QString::fromStdString(m_a->engine)),
                  QString::asprintf("%.2fx", speedup()), speedup()});
  setAgreementRows(m_table, rows);
}

void EngineComparisonView::setFiber(int fiber) {
  if (!m_a || fiber == m_fiber) return;
  m_fiber = fiber;
  if (m_fiberBox->value() != fiber) {
    const QSignalBlocker block(m_fiberBox);
    m_fiberBox->setValue(fiber);
  }
  updatePlot();
}

void EngineComparisonView::updatePlot() {
  const QVector<double> pulls = pullSpectrum(*m_a, *m_b, m_fiber);
  QVector<double> x, y;
  double lim = 0;
  for (int j = 0; j < pulls.size(); ++j) {
    if (!std::isfinite(pulls[j])) continue;
    x.push_back(m_a->wave.at(j));
    y.push_back(pulls[j]);
    lim = std::max(lim, std::abs(pulls[j]));
  }
  m_plot->graph(0)->setData(x, y, true);
  m_plot->graph(0)->setName(tr("fiber %1").arg(m_fiber));
  m_plot->xAxis->setRange(m_a->wave.at(0), m_a->wave.last());
  if (!x.isEmpty()) m_plot->xAxis->setRange(x.front(), x.back());
  lim = lim > 0 ? lim * 1.1 : 1e-6;
  m_plot->yAxis->setRange(-lim, lim);
  m_plot->replot();
}

void EngineComparisonView::updateDifferenceImage() {
  m_diffImage = QImage();
  m_diffMax = 0;
  m_diffScale = 0;
  if (!m_a->model || !m_b->model || m_a->model->rows != m_b->model->rows ||
      m_a->model->cols != m_b->model->cols) {
    m_image->setText(tr("No model images to difference\n(the engines ran without a model)."));
    m_imageCaption->clear();
    return;
  }
  const Array2D<double>& ma = *m_a->model;
  const Array2D<double>& mb = *m_b->model;
  // Crop to the pixels either model touches.
  int x0 = ma.cols, x1 = -1, y0 = ma.rows, y1 = -1;
  for (int y = 0; y < ma.rows; ++y) {
    const double* ra = ma.row(y);
    const double* rb = mb.row(y);
    for (int x = 0; x < ma.cols; ++x)
      if (ra[x] != 0 || rb[x] != 0) {
        x0 = std::min(x0, x);
        x1 = std::max(x1, x);
        y0 = std::min(y0, y);
        y1 = std::max(y1, y);
      }
  }
  if (x1 < 0) {
    m_image->setText(tr("Both model images are empty."));
    return;
  }
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) m_diffMax = std::max(m_diffMax, std::abs(ma(y, x) - mb(y, x)));
  // Colour scale: the 99th percentile of |a - b| over pixels either model touches,
  // so the pattern shows even when a few pixels dominate the maximum.
  std::vector<float> mags;
  mags.reserve(std::size_t(x1 - x0 + 1) * std::size_t(y1 - y0 + 1) / 4 + 1);
  for (int y = y0; y <= y1; y += 2)
    for (int x = x0; x <= x1; x += 2)
      if (ma(y, x) != 0 || mb(y, x) != 0) mags.push_back(float(std::abs(ma(y, x) - mb(y, x))));
  double lim = m_diffMax;
  if (mags.size() > 100) {
    auto k = mags.begin() + std::ptrdiff_t(0.99 * double(mags.size() - 1));
    std::nth_element(mags.begin(), k, mags.end());
    if (*k > 0) lim = *k;
  }
  if (!(lim > 0)) lim = 1;
  m_diffScale = lim;
  // Row 0 of the CCD at the bottom, as in the CCD view.
  m_diffImage = QImage(x1 - x0 + 1, y1 - y0 + 1, QImage::Format_RGB32);
  const QVector<QRgb> table = colorTable(Colormap::Diverging);
  for (int y = y0; y <= y1; ++y) {
    auto* line = reinterpret_cast<QRgb*>(m_diffImage.scanLine(y1 - y));
    for (int x = x0; x <= x1; ++x) {
      const double t = 0.5 + 0.5 * (ma(y, x) - mb(y, x)) / lim;
      line[x - x0] = table[std::clamp(int(t * 255.0 + 0.5), 0, 255)];
    }
  }
  rescaleDifferenceImage();
  m_imageCaption->setText(tr("model %1 \u2212 %2, CCD x %3\u2013%4, y %5\u2013%6; blue \u2212%7 \u2026 red +%7 "
                             "electrons (99th percentile of |\u0394|; max %8)")
                              .arg(QString::fromStdString(m_a->engine), QString::fromStdString(m_b->engine))
                              .arg(x0)
                              .arg(x1)
                              .arg(y0)
                              .arg(y1)
                              .arg(lim, 0, 'g', 3)
                              .arg(m_diffMax, 0, 'g', 3));
}

bool EngineComparisonView::eventFilter(QObject* watched, QEvent* event) {
  if (watched == m_image && event->type() == QEvent::Resize) rescaleDifferenceImage();
  return QWidget::eventFilter(watched, event);
}

void EngineComparisonView::rescaleDifferenceImage() {
  if (m_diffImage.isNull()) return;
  // Smooth (averaging) reduction: a 4k model shrunk by sampling would show single pixels.
  m_image->setPixmap(QPixmap::fromImage(m_diffImage.scaled(std::max(120, m_image->width()),
                                                           std::max(120, m_image->height()),
                                                           Qt::KeepAspectRatio, Qt::SmoothTransformation)));
}

} // namespace spex
