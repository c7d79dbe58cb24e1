#include "sweep_view.h"

#include "../colormap.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QMouseEvent>
#include <QPainter>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace spex {

// --- SweepHeatmap

SweepHeatmap::SweepHeatmap(QWidget* parent) : QWidget(parent) { setMinimumSize(200, 150); }

void SweepHeatmap::setData(const QString& title, const QVector<int>& xs, const QVector<int>& ys,
                           const QVector<double>& values, const QVector<int>& rows, int best,
                           bool higherIsBetter, const QString& format) {
  m_title = title;
  m_xs = xs;
  m_ys = ys;
  m_values = values;
  m_rows = rows;
  m_best = best;
  m_higherIsBetter = higherIsBetter;
  m_format = format;
  m_lo = INFINITY;
  m_hi = -INFINITY;
  for (double v : m_values)
    if (std::isfinite(v)) {
      m_lo = std::min(m_lo, v);
      m_hi = std::max(m_hi, v);
    }
  update();
}

double SweepHeatmap::value(int i, int j) const {
  const int k = i * int(m_xs.size()) + j;
  return i >= 0 && j >= 0 && j < columns() && k < m_values.size() ? m_values[k] : std::nan("");
}

int SweepHeatmap::sweepRow(int i, int j) const {
  const int k = i * int(m_xs.size()) + j;
  return i >= 0 && j >= 0 && j < columns() && k < m_rows.size() ? m_rows[k] : -1;
}

void SweepHeatmap::setAppliedCell(int cell) {
  m_applied = cell;
  update();
}

HeatmapLegend SweepHeatmap::legend() const {
  HeatmapLegend l;
  l.lo = m_lo;
  l.hi = m_hi;
  l.reversed = !m_higherIsBetter;
  l.label = !m_legendLabel.isEmpty() ? m_legendLabel
            : m_higherIsBetter          ? tr("brighter is higher")
                                        : tr("brighter is lower");
  // The cells' own format: "%.0f" -> 'f', 0; "%.4f" -> 'f', 4.
  const int dot = m_format.indexOf(QLatin1Char('.'));
  l.format = 'f';
  l.precision = dot >= 0 ? m_format.mid(dot + 1, 1).toInt() : 3;
  for (double v : m_values) l.count += std::isfinite(v);
  return l;
}

QRect SweepHeatmap::gridRect() const {
  // Room for the colour bar's panel under the axis labels.
  const int legend = HeatmapLegend().size(fontMetrics()).height() + 4;
  return rect().adjusted(70, 24, -10, -36 - legend);
}

QRect SweepHeatmap::cellRect(int i, int j) const {
  const QRect g = gridRect();
  if (columns() == 0 || rowsCount() == 0) return {};
  const double cw = double(g.width()) / columns(), ch = double(g.height()) / rowsCount();
  // Row 0 (smallest nsubbundles) at the bottom.
  return QRectF(g.left() + j * cw, g.bottom() + 1 - (i + 1) * ch, cw, ch).toAlignedRect();
}

QColor SweepHeatmap::cellColor(int i, int j) const {
  const double v = value(i, j);
  if (!std::isfinite(v)) return QColor(90, 90, 90);
  return legend().color(v);
}

void SweepHeatmap::paintEvent(QPaintEvent*) {
  QPainter p(this);
  p.fillRect(rect(), palette().base());
  p.setPen(palette().text().color());
  QFont bold = font();
  bold.setBold(true);
  p.setFont(bold);
  p.drawText(QRect(0, 2, width(), 20), Qt::AlignHCenter | Qt::AlignVCenter, m_title);
  p.setFont(font());
  if (columns() == 0 || rowsCount() == 0) {
    p.drawText(rect(), Qt::AlignCenter, tr("No sweep yet"));
    return;
  }
  for (int i = 0; i < rowsCount(); ++i)
    for (int j = 0; j < columns(); ++j) {
      const QRect c = cellRect(i, j);
      const QColor col = cellColor(i, j);
      p.fillRect(c, col);
      p.setPen(col.lightness() > 140 ? Qt::black : Qt::white);
      const double v = value(i, j);
      QString text = std::isfinite(v) ? QString::asprintf(qPrintable(m_format), v) : tr("failed");
      if (i * columns() + j == m_best) text = QStringLiteral("\u2605 ") + text;
      p.drawText(c, Qt::AlignCenter, text);
    }
  if (m_applied >= 0 && m_applied < columns() * rowsCount()) {
    // The applied setting: a white frame inside a black one (visible on any colour),
    // and a tag in its top-left corner.
    const QRect c = cellRect(m_applied / columns(), m_applied % columns());
    p.setBrush(Qt::NoBrush);
    p.setPen(QPen(Qt::black, 6));
    p.drawRect(c.adjusted(3, 3, -4, -4));
    p.setPen(QPen(Qt::white, 2));
    p.drawRect(c.adjusted(3, 3, -4, -4));
    QFont small = font();
    small.setPointSizeF(std::max(6.0, small.pointSizeF() - 1));
    p.setFont(small);
    const QString tag = tr("applied");
    const QRect t(c.left() + 7, c.top() + 7, p.fontMetrics().horizontalAdvance(tag) + 6, p.fontMetrics().height());
    p.fillRect(t, Qt::black);
    p.setPen(Qt::white);
    p.drawText(t, Qt::AlignCenter, tag);
    p.setFont(font());
  }
  if (m_best >= 0) {
    const QRect c = cellRect(m_best / columns(), m_best % columns());
    p.setPen(QPen(QColor(255, 60, 60), 3));
    p.setBrush(Qt::NoBrush);
    p.drawRect(c.adjusted(1, 1, -2, -2));
  }
  p.setPen(palette().text().color());
  const QRect g = gridRect();
  for (int j = 0; j < columns(); ++j) {
    const QRect c = cellRect(0, j);
    p.drawText(QRect(c.left(), g.bottom() + 2, c.width(), 16), Qt::AlignCenter, QString::number(m_xs[j]));
  }
  p.drawText(QRect(g.left(), g.bottom() + 18, g.width(), 16), Qt::AlignCenter, tr("nwavestep"));
  for (int i = 0; i < rowsCount(); ++i) {
    const QRect c = cellRect(i, 0);
    p.drawText(QRect(0, c.top(), g.left() - 4, c.height()), Qt::AlignRight | Qt::AlignVCenter,
               QString::number(m_ys[i]));
  }
  if (std::isfinite(m_lo)) m_legendRect = legend().paint(p, QPoint(g.left(), g.bottom() + 36));
  else m_legendRect = {};
  p.save();
  p.translate(12, g.center().y());
  p.rotate(-90);
  p.drawText(QRect(-60, -10, 120, 20), Qt::AlignCenter, tr("nsubbundles"));
  p.restore();
}

void SweepHeatmap::mouseReleaseEvent(QMouseEvent* e) {
  for (int i = 0; i < rowsCount(); ++i)
    for (int j = 0; j < columns(); ++j)
      if (cellRect(i, j).contains(e->pos()) && sweepRow(i, j) >= 0) {
        emit cellClicked(sweepRow(i, j));
        return;
      }
}

// --- SweepView

SweepView::SweepView(QWidget* parent) : QWidget(parent) {
  m_engine = new QComboBox;
  m_wavepad = new QComboBox;
  m_best = new QLabel;
  m_best->setWordWrap(true);
  m_throughput = new SweepHeatmap;
  m_accuracy = new SweepHeatmap;
  connect(m_engine, &QComboBox::currentIndexChanged, this, [this] { rebuild(); });
  connect(m_wavepad, &QComboBox::currentIndexChanged, this, [this] { rebuild(); });
  for (SweepHeatmap* m : {m_throughput, m_accuracy})
    connect(m, &SweepHeatmap::cellClicked, this, &SweepView::rowActivated);
  auto* top = new QHBoxLayout;
  top->addWidget(new QLabel(tr("Engine")));
  top->addWidget(m_engine);
  top->addWidget(new QLabel(tr("wavepad frac")));
  top->addWidget(m_wavepad);
  top->addStretch(1);
  auto* maps = new QHBoxLayout;
  maps->addWidget(m_throughput);
  maps->addWidget(m_accuracy);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(top);
  lay->addLayout(maps, 1);
  lay->addWidget(m_best);
}

void SweepView::setResult(SweepResult result, double tolerance) {
  m_result = std::move(result);
  m_tolerance = tolerance >= 0 ? tolerance : m_result.mode == SweepMode::Reference ? 0.1 : 0.02;
  const QString engine = m_engine->currentText();
  const QSignalBlocker b1(m_engine), b2(m_wavepad);
  m_engine->clear();
  m_engine->addItems(engines());
  if (engines().contains(engine)) m_engine->setCurrentText(engine);
  m_wavepad->clear();
  std::vector<double> pads;
  for (const SweepRow& r : m_result.rows)
    if (std::find(pads.begin(), pads.end(), r.wavepadFrac) == pads.end()) pads.push_back(r.wavepadFrac);
  std::sort(pads.begin(), pads.end());
  for (double w : pads) m_wavepad->addItem(QString::number(w), w);
  rebuild();
}

QStringList SweepView::engines() const {
  QStringList out;
  for (const SweepRow& r : m_result.rows)
    if (!out.contains(QString::fromStdString(r.engine))) out.push_back(QString::fromStdString(r.engine));
  return out;
}

void SweepView::setEngine(const QString& engine) { m_engine->setCurrentText(engine); }

void SweepView::setApplied(int nwavestep, int nsubbundles, double wavepadFrac) {
  m_appliedNw = nwavestep;
  m_appliedNs = nsubbundles;
  m_appliedPad = wavepadFrac;
  rebuild();
}
QString SweepView::engine() const { return m_engine->currentText(); }
QString SweepView::bestText() const { return m_best->text(); }

void SweepView::rebuild() {
  const std::string engine = m_engine->currentText().toStdString();
  const double pad = m_wavepad->currentData().toDouble();
  QVector<int> xs, ys;
  for (const SweepRow& r : m_result.rows) {
    if (r.engine != engine || r.wavepadFrac != pad) continue;
    if (!xs.contains(r.nwavestep)) xs.push_back(r.nwavestep);
    if (!ys.contains(r.nsubbundles)) ys.push_back(r.nsubbundles);
  }
  std::sort(xs.begin(), xs.end());
  std::sort(ys.begin(), ys.end());
  const int n = int(xs.size() * ys.size());
  QVector<double> tp(n, std::nan("")), acc(n, std::nan(""));
  QVector<int> rows(n, -1);
  int best = -1;
  const auto bests = m_result.bestSettings(m_tolerance);
  const SweepRow* bestRow = nullptr;
  for (const SweepRow& b : bests)
    if (b.engine == engine) bestRow = &b;
  for (int k = 0; k < int(m_result.rows.size()); ++k) {
    const SweepRow& r = m_result.rows[k];
    if (r.engine != engine || r.wavepadFrac != pad) continue;
    const int cell = int(ys.indexOf(r.nsubbundles) * xs.size() + xs.indexOf(r.nwavestep));
    rows[cell] = k;
    if (!r.ok()) continue;
    tp[cell] = r.throughput;
    const double s = r.score(m_result.mode);
    acc[cell] = std::isfinite(s) && m_result.mode != SweepMode::TimingOnly ? s : std::nan("");
    if (bestRow && bestRow->nwavestep == r.nwavestep && bestRow->nsubbundles == r.nsubbundles &&
        bestRow->wavepadFrac == r.wavepadFrac)
      best = cell;
  }
  // The applied setting, if this engine and wavepad swept it.
  int applied = -1;
  if (pad == m_appliedPad && xs.contains(m_appliedNw) && ys.contains(m_appliedNs))
    applied = int(ys.indexOf(m_appliedNs) * xs.size() + xs.indexOf(m_appliedNw));
  m_throughput->setData(tr("Throughput [bins/s]"), xs, ys, tp, rows, best, true, QStringLiteral("%.0f"));
  const QString accTitle = m_result.mode == SweepMode::Truth       ? tr("Pulls vs truth: |mean| + |std \u2212 1|")
                           : m_result.mode == SweepMode::Reference ? tr("Max |\u0394|/\u03c3 vs reference")
                                                                   : tr("Accuracy (timing-only sweep)");
  m_accuracy->setData(accTitle, xs, ys, acc, rows, best, false, QStringLiteral("%.4f"));
  m_throughput->setLegendLabel(tr("bins per second (brighter: faster)"));
  m_accuracy->setLegendLabel(tr("score (brighter: more accurate)"));
  m_throughput->setAppliedCell(applied);
  m_accuracy->setAppliedCell(applied);
  if (bestRow)
    m_best->setText(tr("\u2605 Best for %1: nwavestep %2, nsubbundles %3, wavepad %4 \u2014 %5 bins/s "
                       "(fastest within %6 of the best accuracy)")
                        .arg(QString::fromStdString(bestRow->engine))
                        .arg(bestRow->nwavestep)
                        .arg(bestRow->nsubbundles)
                        .arg(bestRow->wavepadFrac)
                        .arg(bestRow->throughput, 0, 'f', 0)
                        .arg(m_tolerance));
  else
    m_best->setText(m_result.rows.empty() ? tr("No sweep yet.") : tr("No successful setting for this engine."));
}

} // namespace spex
