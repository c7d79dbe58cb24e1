#include "region_stats.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableWidget>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace spex {

namespace {

RegionStats summarise(std::vector<double>& v, long masked) {
  RegionStats s;
  s.masked = masked;
  s.n = long(v.size());
  if (v.empty()) {
    s.mean = s.median = s.sigma = s.min = s.max = std::numeric_limits<double>::quiet_NaN();
    return s;
  }
  double sum = 0;
  s.min = v[0];
  s.max = v[0];
  for (double x : v) {
    sum += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean = sum / double(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean); // two passes: no cancellation
  s.sigma = v.size() > 1 ? std::sqrt(ss / double(v.size() - 1)) : 0.0;
  const std::size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  s.median = v[mid];
  if (v.size() % 2 == 0) s.median = 0.5 * (s.median + *std::max_element(v.begin(), v.begin() + mid));
  return s;
}

QString number(double v) { return std::isfinite(v) ? QString::number(v, 'g', 6) : QStringLiteral("\u2013"); }

} // namespace

QRect pixelsIn(const QRectF& ccd, int nx, int ny) {
  if (ccd.isNull() || nx <= 0 || ny <= 0) return {};
  const int c0 = std::max(0, int(std::ceil(ccd.left()))), c1 = std::min(nx - 1, int(std::floor(ccd.right())));
  const int r0 = std::max(0, int(std::ceil(ccd.top()))), r1 = std::min(ny - 1, int(std::floor(ccd.bottom())));
  if (c1 < c0 || r1 < r0) return {};
  return QRect(QPoint(c0, r0), QPoint(c1, r1));
}

RegionStats regionStats(const Array2D<double>& a, const QRect& box, const Array2D<double>* weight) {
  std::vector<double> v;
  long masked = 0;
  if (!box.isEmpty()) {
    v.reserve(std::size_t(box.width()) * std::size_t(box.height()));
    for (int r = box.top(); r <= box.bottom(); ++r)
      for (int c = box.left(); c <= box.right(); ++c) {
        const double x = a(r, c);
        if (!std::isfinite(x) || (weight && !((*weight)(r, c) > 0))) ++masked;
        else v.push_back(x);
      }
  }
  return summarise(v, masked);
}

RegionStats chiRegionStats(const Image& img, const Array2D<double>& model, const QRect& box) {
  std::vector<double> v;
  long masked = 0;
  if (!box.isEmpty())
    for (int r = box.top(); r <= box.bottom(); ++r)
      for (int c = box.left(); c <= box.right(); ++c) {
        const double iv = img.ivar(r, c);
        const double x = (img.pix(r, c) - model(r, c)) * std::sqrt(std::max(iv, 0.0));
        if (!(iv > 0) || !std::isfinite(x)) ++masked;
        else v.push_back(x);
      }
  return summarise(v, masked);
}

RegionStatsView::RegionStatsView(QWidget* parent) : QWidget(parent) {
  m_label = new QLabel(this);
  m_label->setWordWrap(true);
  m_table = new QTableWidget(6, 3, this);
  m_table->setObjectName(QStringLiteral("regionStatsTable"));
  m_table->setHorizontalHeaderLabels({tr("data"), tr("model"), tr("\u03c7")});
  m_table->setVerticalHeaderLabels({tr("N pixels"), tr("mean"), tr("median"), tr("\u03c3"), tr("min"), tr("max")});
  m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  m_table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  m_table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  // As tall as its six rows, no more: the cut plot below gets the rest of the dock.
  m_table->setSizeAdjustPolicy(QAbstractScrollArea::AdjustToContents);
  m_table->setVerticalScrollBarPolicy(Qt::ScrollBarAlwaysOff);
  m_table->setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
  setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Maximum);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_label);
  lay->addWidget(m_table);
  recompute();
}

void RegionStatsView::setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                                const QString& modelName) {
  if (model && image && (model->rows != image->ny || model->cols != image->nx)) model.reset();
  m_image = std::move(image);
  m_model = std::move(model);
  m_modelName = modelName;
  recompute();
}

void RegionStatsView::setRegion(const QRectF& ccd) {
  m_region = ccd;
  recompute();
}

QString RegionStatsView::summary() const { return m_label->text(); }

void RegionStatsView::recompute() {
  for (RegionStats& s : m_stats) s = RegionStats{};
  m_pixels = m_image ? pixelsIn(m_region, m_image->nx, m_image->ny) : QRect();
  if (!m_image || m_pixels.isEmpty()) {
    m_label->setText(m_image ? tr("Draw a box on the CCD (the Box tool, B) to see its statistics here.")
                             : tr("Nothing is open."));
    // Already empty (every extraction updates the model): no table reset, which
    // would re-lay out the header and the dock.
    if (!m_tableEmpty) m_table->clearContents();
    m_tableEmpty = true;
    return;
  }
  m_tableEmpty = false;
  m_stats[0] = regionStats(m_image->pix, m_pixels, &m_image->ivar);
  if (m_model) {
    m_stats[1] = regionStats(*m_model, m_pixels, &m_image->ivar);
    m_stats[2] = chiRegionStats(*m_image, *m_model, m_pixels);
  }
  QString text = tr("Box x %1\u2013%2, y %3\u2013%4 (%5 \u00d7 %6 px)")
                     .arg(m_pixels.left())
                     .arg(m_pixels.right())
                     .arg(m_pixels.top())
                     .arg(m_pixels.bottom())
                     .arg(m_pixels.width())
                     .arg(m_pixels.height());
  if (m_stats[0].masked > 0) text += tr("; %1 masked pixels (ivar 0) left out").arg(m_stats[0].masked);
  text += m_model ? tr("; model: %1").arg(m_modelName) : tr("; no model yet (extract to get model and \u03c7)");
  m_label->setText(text);
  for (int c = 0; c < 3; ++c) {
    const RegionStats& s = m_stats[c];
    const bool have = c == 0 || m_model;
    const double vals[] = {double(s.n), s.mean, s.median, s.sigma, s.min, s.max};
    for (int r = 0; r < 6; ++r) {
      const QString t = !have ? QStringLiteral("\u2013") : r == 0 ? QString::number(s.n) : number(vals[r]);
      auto* item = new QTableWidgetItem(t);
      item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
      m_table->setItem(r, c, item);
    }
  }
}

} // namespace spex
