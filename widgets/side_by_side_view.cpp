#include "side_by_side_view.h"

#include "background.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include <cmath>

namespace spex {

namespace {
constexpr double kChiLimit = 5.0; // as the residual view: chi over +-5 sigma
const char* kCaptions[] = {"data", "model", "\u03c7"};
} // namespace

SideBySideView::SideBySideView(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  auto* row = new QHBoxLayout;
  row->setSpacing(3);
  for (int i = 0; i < 3; ++i) {
    auto* c = new ImageCanvas(state, this);
    c->setObjectName(QStringLiteral("sideBySide_%1").arg(i));
    c->setLeadsFit(false); // follows the CCD view's zoom and pan
    c->setMinimumSize(120, 120);
    c->setCaption(QString::fromUtf8(kCaptions[i]));
    connect(c, &ImageCanvas::hovered, this, &SideBySideView::onHover);
    connect(c, &ImageCanvas::hoverLeft, this, &SideBySideView::onLeave);
    m_canvas[i] = c;
    row->addWidget(c, 1);
  }
  m_values = new QLabel(this);
  m_values->setObjectName(QStringLiteral("sideBySideValues"));
  m_values->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_values->setText(tr("Move the cursor over any of the three: the crosshair follows in all of them."));
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addWidget(m_values);
  lay->addLayout(row, 1);
  connect(&m_watcher, &QFutureWatcher<Job>::finished, this, &SideBySideView::onFinished);
}

void SideBySideView::setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                               std::shared_ptr<const Array2D<double>> chi, const ScaleSettings& dataScale,
                               quint64 revision) {
  if (image == m_image && model.get() == m_modelSource && chi == m_chi && dataScale == m_scale &&
      revision == m_revision && !m_dirty)
    return;
  // A new snapshot only when the model is another array or another revision of it.
  if (model.get() != m_modelSource || revision != m_revision || !model)
    m_model = model ? std::make_shared<const Array2D<double>>(*model) : nullptr;
  m_modelSource = model.get();
  m_revision = revision;
  m_image = std::move(image);
  m_chi = std::move(chi);
  m_scale = dataScale;
  m_dirty = true;
  if (isVisible() && !m_watcher.isRunning()) start();
}

void SideBySideView::showEvent(QShowEvent* e) {
  QWidget::showEvent(e);
  if (m_dirty && !m_watcher.isRunning()) start();
}

void SideBySideView::start() {
  m_dirty = false;
  Job j;
  j.image = m_image;
  j.model = m_model;
  j.chi = m_chi;
  j.scale = m_scale;
  m_watcher.setFuture(QtConcurrent::run(backgroundPool(), [j]() mutable {
    if (j.image && !j.image->pix.empty()) {
      // Model with the data's limits, so that like compares with like.
      const ScaleRange r = computeRange(j.image->pix, &j.image->ivar, j.scale);
      const QVector<QRgb> t = displayTable(j.scale);
      j.ranges = {r, r, ScaleRange{-kChiLimit, kChiLimit}};
      j.tables = {t, t, colorTable(Colormap::Diverging)};
      j.pictures[0].build(renderImage(j.image->pix, r, j.scale.stretch, t));
      if (j.model) j.pictures[1].build(renderImage(*j.model, r, j.scale.stretch, t));
      if (j.chi) j.pictures[2].build(renderImage(*j.chi, j.ranges[2], Stretch::Linear, j.tables[2]));
    }
    return j;
  }));
}

void SideBySideView::waitForUpdate() {
  if (m_dirty && !m_watcher.isRunning()) start();
  m_watcher.waitForFinished();
  onFinished();
}

void SideBySideView::onFinished() {
  if (!m_watcher.isFinished() || m_watcher.future().resultCount() == 0) return;
  Job j = m_watcher.result();
  m_watcher.setFuture(QFuture<Job>()); // consumed
  if (m_dirty) {
    start(); // the inputs changed while it ran
    return;
  }
  const QString electrons = QStringLiteral("e\u207b per pixel");
  for (int i = 0; i < 3; ++i) {
    ImageCanvas* c = m_canvas[i];
    const bool have = !j.pictures[i].levels.isEmpty();
    c->setPicture(std::move(j.pictures[i]));
    if (have) c->setColorBar(j.tables[i], j.ranges[i], i == 2 ? Stretch::Linear : j.scale.stretch,
                             i == 2 ? QStringLiteral("\u03c7 [\u03c3]") : electrons);
    else c->clearColorBar();
    c->setCaption(have || !j.image ? QString::fromUtf8(kCaptions[i])
                                   : tr("%1: no model yet").arg(QString::fromUtf8(kCaptions[i])));
  }
  emit updated();
}

QString SideBySideView::valuesAt(QPointF p) const {
  const int c = int(std::lround(p.x())), r = int(std::lround(p.y()));
  if (!m_image || c < 0 || r < 0 || c >= m_image->nx || r >= m_image->ny) return {};
  QString s = QStringLiteral("x %1  y %2   data %3").arg(c).arg(r).arg(m_image->pix(r, c), 0, 'g', 6);
  if (m_model) {
    const double mv = (*m_model)(r, c);
    const double chi = (m_image->pix(r, c) - mv) * std::sqrt(std::max(m_image->ivar(r, c), 0.0));
    s += QStringLiteral("   model %1   \u03c7 %2").arg(mv, 0, 'g', 6).arg(chi, 0, 'f', 3);
  } else {
    s += tr("   model \u2013   \u03c7 \u2013 (no model yet)");
  }
  return s;
}

QString SideBySideView::readout() const { return m_values->text(); }

void SideBySideView::onHover(QPointF ccd) {
  const QPointF px(std::round(ccd.x()), std::round(ccd.y())); // the pixel under the cursor
  for (ImageCanvas* c : m_canvas) c->setCrosshair(px);
  m_values->setText(valuesAt(ccd));
}

void SideBySideView::onLeave() {
  for (ImageCanvas* c : m_canvas) c->clearCrosshair();
}

} // namespace spex
