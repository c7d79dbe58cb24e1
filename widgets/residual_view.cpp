#include "residual_view.h"

#include "background.h"

#include <qcustomplot.h>

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QSplitter>
#include <QTimer>
#include <QtConcurrent/QtConcurrentRun>
#include <QVBoxLayout>

#include <algorithm>
#include <cmath>

namespace spex {

namespace {
const char* modeName(int m) {
  static const char* names[] = {"data", "model", "data \u2212 model", "\u03c7 = (data \u2212 model)\u221aivar"};
  return names[m];
}
// What the caption on the image says.
const char* shortName(int m) {
  static const char* names[] = {"data", "model", "data \u2212 model", "\u03c7"};
  return names[m];
}
constexpr double kChiLimit = ChiMap::kLimit; // chi image and histogram span +-5 sigma
// Changed boxes up to this many pixels are redone in place on the GUI thread (about
// 10 ms per million); more (a whole frame's run) go to a worker.
constexpr double kMaxInPlacePixels = 2.0e6;
} // namespace

ResidualView::ResidualView(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  m_canvas = new ImageCanvas(state, this);
  m_canvas->setObjectName(QStringLiteral("residualCanvas"));
  m_canvas->setLeadsFit(false); // it follows the CCD view's zoom and pan
  m_hist = new QCustomPlot(this);
  m_hist->setObjectName(QStringLiteral("chiHistogram"));
  m_hist->setPlottingHint(QCP::phImmediateRefresh, false); // see SpectrumView
  m_hist->xAxis->setLabel(QStringLiteral("\u03c7"));
  m_hist->yAxis->setLabel(tr("pixels"));
  m_hist->setMinimumWidth(160);
  m_hist->legend->setVisible(true);
  m_hist->legend->setFont(QFont(font().family(), 8));
  m_hist->axisRect()->insetLayout()->setInsetAlignment(0, Qt::AlignTop | Qt::AlignLeft);
  // The statistics go in a title line, not the legend: a narrow dock would cut them.
  m_hist->plotLayout()->insertRow(0);
  m_histTitle = new QCPTextElement(m_hist, QString(), QFont(font().family(), 9));
  m_hist->plotLayout()->addElement(0, 0, m_histTitle);
  m_hist->xAxis->ticker()->setTickCount(5);
  m_hist->yAxis->ticker()->setTickCount(4);

  m_modeBox = new QComboBox(this);
  m_blinkWith = new QComboBox(this);
  for (int m = Data; m <= Chi; ++m) {
    m_modeBox->addItem(QString::fromUtf8(modeName(m)), m);
    m_blinkWith->addItem(QString::fromUtf8(modeName(m)), m);
  }
  // Long item texts must not make the dock wide (the CCD is the main panel).
  for (QComboBox* c : {m_modeBox, m_blinkWith}) {
    c->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    c->setMinimumContentsLength(9);
  }
  m_modeBox->setCurrentIndex(Chi);
  m_blinkWith->setCurrentIndex(Data);
  m_blink = new QCheckBox(tr("blink with"), this);
  m_note = new QLabel(this);
  // Long notes must not widen the dock: they wrap onto a second line instead.
  m_note->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  m_note->setWordWrap(true);
  m_timer = new QTimer(this);
  m_timer->setInterval(600);
  connect(m_timer, &QTimer::timeout, this, &ResidualView::blinkStep);
  connect(&m_watcher, &QFutureWatcher<Job>::finished, this, &ResidualView::onJobFinished);
  connect(m_modeBox, &QComboBox::currentIndexChanged, this, [this](int i) { setMode(Mode(i)); });
  connect(m_blinkWith, &QComboBox::currentIndexChanged, this, [this] { rebuild(); });
  connect(m_blink, &QCheckBox::toggled, this, &ResidualView::setBlink);
  // Right-drag on this image sets the contrast and bias of data - model and chi (data
  // and model follow the CCD view's).
  connect(m_canvas, &ImageCanvas::contrastBiasChanged, this, [this] {
    if (m_mode == Residual || m_mode == Chi || m_blinkWith->currentIndex() >= Residual) rebuild();
  });
  connect(m_canvas, &ImageCanvas::hovered, this, [this](QPointF p) {
    const int c = int(std::lround(p.x())), r = int(std::lround(p.y()));
    if (!m_image || c < 0 || r < 0 || c >= m_image->nx || r >= m_image->ny) return;
    QString s = QStringLiteral("x %1  y %2  data %3").arg(c).arg(r).arg(m_image->pix(r, c), 0, 'g', 6);
    if (m_model) {
      const double mv = (*m_model)(r, c);
      const double iv = m_image->ivar(r, c);
      s += QStringLiteral("  model %1  data\u2212model %2  \u03c7 %3")
               .arg(mv, 0, 'g', 6)
               .arg(m_image->pix(r, c) - mv, 0, 'g', 5)
               .arg((m_image->pix(r, c) - mv) * std::sqrt(iv), 0, 'g', 4);
    }
    emit readoutChanged(s);
  });

  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("show"), this));
  bar->addWidget(m_modeBox);
  bar->addWidget(m_blink);
  bar->addWidget(m_blinkWith);
  bar->addWidget(m_note, 1);
  auto* split = new QSplitter(Qt::Horizontal, this);
  split->setChildrenCollapsible(false);
  split->addWidget(m_canvas);
  split->addWidget(m_hist);
  split->setStretchFactor(0, 3);
  split->setStretchFactor(1, 2);
  m_split = split;
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(bar);
  lay->addWidget(split, 1);
}

void ResidualView::resizeEvent(QResizeEvent* e) {
  QWidget::resizeEvent(e);
  // Image beside the histogram in a wide dock, above it in a tall one.
  const Qt::Orientation o = height() > width() ? Qt::Vertical : Qt::Horizontal;
  if (m_split->orientation() != o) {
    m_split->setOrientation(o);
    const int len = o == Qt::Vertical ? m_split->height() : m_split->width();
    m_split->setSizes({len * 3 / 5, len * 2 / 5});
  }
}

void ResidualView::setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                             const QString& modelName, quint64 revision) {
  const bool sameImage = image == m_image;
  if (!sameImage) m_haveRange = false;
  if (model && image && (model->rows != image->ny || model->cols != image->nx)) model.reset();
  if (!sameImage || model != m_model || revision != m_revision) {
    m_resid.reset();
    m_chiMap.reset();
    m_stats = {};
    m_histCounts.clear();
  }
  m_image = std::move(image);
  m_model = std::move(model);
  m_modelName = modelName;
  m_revision = revision;
  if (!m_image) {
    // Nothing to show: clear at once; a running job's answer will be dropped.
    m_rebuildQueued = false;
    m_canvas->setPicture(QImage());
    m_canvas->setAlternatePicture(QImage());
    m_canvas->clearColorBar();
    m_canvas->setCaption(QString());
    m_note->clear();
    updateHistogram();
    return;
  }
  rebuild();
}

void ResidualView::setDataScale(const ScaleSettings& s) {
  if (s == m_dataScale) return;
  m_dataScale = s;
  m_haveRange = false;
  if (m_image) rebuild();
}

void ResidualView::setMode(Mode m) {
  m_mode = m;
  if (m_modeBox->currentIndex() != int(m)) m_modeBox->setCurrentIndex(int(m));
  rebuild();
}

void ResidualView::setBlink(bool on) {
  if (m_blink->isChecked() != on) m_blink->setChecked(on);
  if (on) m_timer->start();
  else {
    m_timer->stop();
    m_showingPartner = false;
    m_canvas->setShowAlternate(false);
  }
}

bool ResidualView::blinking() const { return m_timer->isActive(); }

void ResidualView::blinkStep() {
  m_showingPartner = !m_showingPartner;
  m_canvas->setShowAlternate(m_showingPartner);
  const int m = m_showingPartner ? m_blinkWith->currentIndex() : int(m_mode);
  m_note->setText(tr("showing %1").arg(QString::fromUtf8(modeName(m))));
  showBarOf(m_showingPartner);
}

QString ResidualView::shownName() const {
  if (m_shownIsData && !m_showingPartner) return QString::fromUtf8(shortName(Data));
  return QString::fromUtf8(shortName(m_showingPartner ? m_blinkWith->currentIndex() : int(m_mode)));
}

void ResidualView::showBarOf(bool partner) {
  // The caption on the image says which picture is shown: a blink is never ambiguous.
  const Bar& b = partner ? m_partnerBar : m_shownBar;
  if (b.table.size() == 256) m_canvas->setColorBar(b.table, b.range, b.stretch, b.unit);
  else m_canvas->clearColorBar();
  m_canvas->setCaption(m_image ? shownName() : QString());
}

void ChiMap::compute(const Image& img, const Array2D<double>& model) {
  if (chi.rows != img.ny || chi.cols != img.nx) chi = Array2D<double>(img.ny, img.nx);
  nbx = (img.nx + kBlock - 1) / kBlock;
  nby = (img.ny + kBlock - 1) / kBlock;
  const std::size_t nb = std::size_t(nbx) * nby;
  n.assign(nb, 0);
  sum.assign(nb, 0.0);
  sum2.assign(nb, 0.0);
  hist.assign(nb * kBins, 0.0);
  for (std::size_t i = 0; i < chi.size(); ++i)
    chi.data[i] = (img.pix.data[i] - model.data[i]) * std::sqrt(std::max(img.ivar.data[i], 0.0));
  for (int by = 0; by < nby; ++by)
    for (int bx = 0; bx < nbx; ++bx) blockStats(img, model, bx, by);
  total();
}

void ChiMap::update(const Image& img, const Array2D<double>& model, const std::vector<PixelBox>& boxes) {
  if (chi.rows != img.ny || chi.cols != img.nx || nbx == 0) return compute(img, model);
  std::vector<uint8_t> touched(std::size_t(nbx) * nby, 0);
  for (const PixelBox& b0 : boxes) {
    const int x0 = std::max(0, b0.x0), x1 = std::min(img.nx, b0.x1);
    const int y0 = std::max(0, b0.y0), y1 = std::min(img.ny, b0.y1);
    if (x1 <= x0 || y1 <= y0) continue;
    for (int y = y0; y < y1; ++y) {
      const double* p = img.pix.row(y);
      const double* iv = img.ivar.row(y);
      const double* m = model.row(y);
      double* c = chi.row(y);
      for (int x = x0; x < x1; ++x) c[x] = (p[x] - m[x]) * std::sqrt(std::max(iv[x], 0.0));
    }
    for (int by = y0 / kBlock; by <= (y1 - 1) / kBlock; ++by)
      for (int bx = x0 / kBlock; bx <= (x1 - 1) / kBlock; ++bx) touched[std::size_t(by) * nbx + bx] = 1;
  }
  for (int by = 0; by < nby; ++by)
    for (int bx = 0; bx < nbx; ++bx)
      if (touched[std::size_t(by) * nbx + bx]) blockStats(img, model, bx, by);
  total();
}

void ChiMap::blockStats(const Image& img, const Array2D<double>& model, int bx, int by) {
  const std::size_t b = std::size_t(by) * nbx + bx;
  const double bw = 2 * kLimit / kBins;
  double* h = hist.data() + b * kBins;
  std::fill(h, h + kBins, 0.0);
  double s = 0, s2 = 0;
  long cnt = 0;
  const int x0 = bx * kBlock, x1 = std::min(img.nx, x0 + kBlock);
  const int y0 = by * kBlock, y1 = std::min(img.ny, y0 + kBlock);
  for (int y = y0; y < y1; ++y) {
    const double* iv = img.ivar.row(y);
    const double* m = model.row(y);
    const double* c = chi.row(y);
    for (int x = x0; x < x1; ++x) {
      // Only pixels that some extracted spot reaches say anything about the fit.
      if (!(iv[x] > 0 && m[x] != 0)) continue;
      s += c[x];
      s2 += c[x] * c[x];
      ++cnt;
      const int k = int(std::floor((c[x] + kLimit) / bw));
      if (k >= 0 && k < kBins) h[k] += 1;
    }
  }
  n[b] = cnt;
  sum[b] = s;
  sum2[b] = s2;
}

void ChiMap::total() {
  histogram = QVector<double>(kBins, 0.0);
  double s = 0, s2 = 0;
  long cnt = 0;
  for (std::size_t b = 0; b < n.size(); ++b) {
    if (!n[b]) continue;
    cnt += n[b];
    s += sum[b];
    s2 += sum2[b];
    const double* h = hist.data() + b * kBins;
    for (int k = 0; k < kBins; ++k) histogram[k] += h[k];
  }
  stats = {};
  stats.n = cnt;
  if (cnt > 0) {
    stats.mean = s / double(cnt);
    stats.sigma = std::sqrt(std::max(0.0, s2 / double(cnt) - stats.mean * stats.mean));
  }
}

void ResidualView::modelChanged(quint64 from, quint64 to, const std::vector<PixelBox>& boxes) {
  // A picture can be patched in place only when nothing else is being computed for it,
  // it shows revision `from`, and the boxes are few (a whole frame is redone in the
  // background instead of stalling the event loop).
  double area = 0;
  for (const PixelBox& b : boxes) area += double(std::max(0, b.width())) * std::max(0, b.height());
  const Mode partnerMode = Mode(m_blinkWith->currentIndex());
  const bool incremental = m_image && m_model && m_chiMap && m_revision == from && !isUpdating() &&
                           !m_showingPartner && area <= kMaxInPlacePixels &&
                           (m_haveRange || (m_mode != Model && partnerMode != Model));
  m_revision = to;
  if (!incremental) {
    m_resid.reset();
    m_chiMap.reset();
    m_stats = {};
    m_histCounts.clear();
    rebuild();
    return;
  }
  const Image& img = *m_image;
  // Someone else holds the chi array (chi(): the side-by-side view, maybe its worker):
  // they keep the old one and get a new pointer, so they see the change.
  if (m_chiMap.use_count() > 1) m_chiMap = std::make_shared<ChiMap>(*m_chiMap);
  m_chiMap->update(img, *m_model, boxes);
  m_stats = m_chiMap->stats;
  m_histCounts = m_chiMap->histogram;
  const Mode partner = Mode(m_blinkWith->currentIndex());
  if (m_resid && (m_mode == Residual || partner == Residual)) {
    // Its colour limits are percentiles over the whole CCD: redo it in the background.
    m_resid.reset();
    rebuild();
    return;
  }
  m_resid.reset();
  auto patch = [&](Mode m, bool alternate) {
    if (m != Model && m != Chi) return; // the data does not change with the model
    // The colours the picture was drawn with (colormap, contrast, bias, limits).
    const Bar& bar = alternate ? m_partnerBar : m_shownBar;
    if (bar.table.size() != 256) return;
    for (const PixelBox& b : boxes) {
      const int x0 = std::max(0, b.x0), x1 = std::min(img.nx, b.x1);
      const int y0 = std::max(0, b.y0), y1 = std::min(img.ny, b.y1);
      if (x1 <= x0 || y1 <= y0) continue;
      // Image rows run top-down: CCD row y is image row ny - 1 - y.
      const QRect rect(x0, img.ny - y1, x1 - x0, y1 - y0);
      m_canvas->updatePicture(rect, [&](QImage& pic) {
        if (m == Model)
          renderRegion(*m_model, bar.range, bar.stretch, bar.table, pic, x0, x1, y0, y1);
        else
          renderRegion(m_chiMap->chi, bar.range, bar.stretch, bar.table, pic, x0, x1, y0, y1);
      }, alternate);
    }
  };
  patch(m_mode, false);
  patch(partner, true);
  m_note->setText(tr("model: %1;  \u03c7 over %2 px: mean %3, \u03c3 %4")
                      .arg(m_modelName)
                      .arg(m_stats.n)
                      .arg(m_stats.mean, 0, 'f', 3)
                      .arg(m_stats.sigma, 0, 'f', 3));
  updateHistogram();
  emit updated();
}

void ResidualView::compute(Job& j) {
  const Image& img = *j.image;
  if (!j.haveRange && !img.pix.empty()) {
    j.dataRange = computeRange(img.pix, &img.ivar, j.dataScale);
    j.haveRange = true;
  }
  if (j.model && !j.chi) {
    auto chi = std::make_shared<ChiMap>();
    chi->compute(img, *j.model);
    j.stats = chi->stats;
    j.hist = chi->histogram;
    j.chi = std::move(chi);
  }
  if (j.model && !j.resid && (j.mode == Residual || j.partnerMode == Residual)) {
    auto r = std::make_shared<Array2D<double>>(img.ny, img.nx);
    for (std::size_t i = 0; i < r->size(); ++i) r->data[i] = img.pix.data[i] - j.model->data[i];
    j.resid = std::move(r);
  }
  QImage shown = render(j, j.mode, &j.shownBar);
  j.shownIsData = shown.isNull() && !j.model;
  if (j.shownIsData) shown = render(j, Data, &j.shownBar); // no model yet: the data, so it is never blank
  j.shown.build(shown);
  j.partner.build(render(j, j.partnerMode, &j.partnerBar));
}

QImage ResidualView::render(const Job& j, Mode m, Bar* bar) {
  const Image& img = *j.image;
  Bar b;
  QImage out;
  const QString electrons = QStringLiteral("e\u207b per pixel");
  switch (m) {
  case Data:
    if (img.pix.empty()) break;
    b = {displayTable(j.dataScale), j.dataRange, j.dataScale.stretch, electrons};
    out = renderImage(img.pix, b.range, b.stretch, b.table);
    break;
  case Model:
    // Same limits as the data so that blinking compares like with like.
    if (!j.model) break;
    b = {displayTable(j.dataScale), j.dataRange, j.dataScale.stretch, electrons};
    out = renderImage(*j.model, b.range, b.stretch, b.table);
    break;
  case Residual: {
    if (!j.resid) break;
    ScaleSettings s;
    s.limits = Limits::Percentile;
    s.percentile = 99.5;
    const ScaleRange r = computeRange(*j.resid, &img.ivar, s);
    const double lim = std::max(std::abs(r.lo), std::abs(r.hi));
    b = {adjustTable(colorTable(Colormap::Diverging), j.contrast, j.bias, false), {-lim, lim}, Stretch::Linear,
         electrons};
    out = renderImage(*j.resid, b.range, b.stretch, b.table);
    break;
  }
  case Chi:
    if (!j.chi) break;
    b = {adjustTable(colorTable(Colormap::Diverging), j.contrast, j.bias, false), {-kChiLimit, kChiLimit},
         Stretch::Linear, QStringLiteral("\u03c7 [\u03c3]")};
    out = renderImage(j.chi->chi, b.range, b.stretch, b.table);
    break;
  }
  if (bar && !out.isNull()) *bar = b;
  return out;
}

void ResidualView::rebuild() {
  if (!m_image) return;
  if (m_watcher.isRunning()) {
    m_rebuildQueued = true; // the running job's answer is stale; start again when it ends
    return;
  }
  startJob();
}

void ResidualView::startJob() {
  m_rebuildQueued = false;
  Job j;
  j.image = m_image;
  j.model = m_model;
  j.revision = m_revision;
  j.chi = m_chiMap;
  j.resid = m_resid;
  j.stats = m_stats;
  j.hist = m_histCounts;
  j.dataScale = m_dataScale;
  j.dataRange = m_dataRange;
  j.haveRange = m_haveRange;
  j.mode = m_mode;
  j.partnerMode = Mode(m_blinkWith->currentIndex());
  j.contrast = m_canvas->contrast();
  j.bias = m_canvas->bias();
  m_jobConsumed = false;
  m_watcher.setFuture(QtConcurrent::run(backgroundPool(), [j]() mutable {
    compute(j);
    return std::move(j); // the pictures leave the task: the canvas must hold them alone
  }));
}

bool ResidualView::isUpdating() const { return !m_jobConsumed || m_rebuildQueued; }

void ResidualView::waitForUpdate() {
  const bool waited = isUpdating();
  while (isUpdating()) {
    m_watcher.waitForFinished();
    onJobFinished();
  }
  // The histogram replots on the next event-loop pass; a caller that grabs the view
  // right away (export, --screenshot) must see it drawn now.
  if (waited) m_hist->replot(QCustomPlot::rpImmediateRefresh);
}

void ResidualView::onJobFinished() {
  if (m_jobConsumed || !m_watcher.isFinished()) return;
  m_jobConsumed = true;
  if (m_watcher.isCanceled() || m_watcher.future().resultCount() == 0) {
    if (m_rebuildQueued && m_image) startJob();
    m_rebuildQueued = false;
    return;
  }
  // Taken, not copied: a copy left in the future would share the pictures, and the
  // first in-place update (modelChanged) would then copy a whole CCD picture.
  Job j = m_watcher.future().takeResult();
  // A job for other inputs (changed while it ran) is dropped; one for the same inputs
  // with another mode or scale still hands over its arrays.
  const bool sameInputs = j.image == m_image && j.model == m_model && j.revision == m_revision;
  if (sameInputs) {
    m_chiMap = j.chi;
    m_resid = j.resid;
    m_stats = j.stats;
    m_histCounts = j.hist;
    if (j.dataScale == m_dataScale) {
      m_dataRange = j.dataRange;
      m_haveRange = j.haveRange;
    }
  }
  if (!m_image) { // cleared while it ran
    m_rebuildQueued = false;
    return;
  }
  if (m_rebuildQueued || !sameInputs) {
    startJob();
    return;
  }
  install(std::move(j));
}

void ResidualView::install(Job&& j) {
  m_showingPartner = false;
  if (j.shownIsData) {
    m_note->setText(tr("no model yet: run an extraction (the model is built with it)"));
  } else if (m_model) {
    m_note->setText(tr("model: %1;  \u03c7 over %2 px: mean %3, \u03c3 %4")
                        .arg(m_modelName)
                        .arg(m_stats.n)
                        .arg(m_stats.mean, 0, 'f', 3)
                        .arg(m_stats.sigma, 0, 'f', 3));
  } else {
    m_note->clear();
  }
  m_canvas->setPicture(std::move(j.shown));
  m_canvas->setAlternatePicture(std::move(j.partner));
  m_canvas->setShowAlternate(false);
  m_shownBar = j.shownBar;
  m_partnerBar = j.partnerBar;
  m_shownIsData = j.shownIsData;
  showBarOf(false);
  updateHistogram();
  emit updated();
}

void ResidualView::updateHistogram() {
  m_hist->clearGraphs();
  m_hist->clearPlottables();
  if (!m_image || !m_model || m_stats.n == 0 || m_histCounts.isEmpty()) {
    m_histTitle->setText(tr("\u03c7 histogram: no model yet"));
    m_hist->replot(QCustomPlot::rpQueuedReplot);
    return;
  }
  const int nbin = int(m_histCounts.size());
  const double bw = 2 * kChiLimit / nbin;
  QVector<double> x(nbin), g(nbin);
  for (int b = 0; b < nbin; ++b) {
    x[b] = -kChiLimit + (b + 0.5) * bw;
    // Unit Gaussian scaled to the number of pixels: what a perfect fit gives.
    g[b] = m_stats.n * bw * std::exp(-0.5 * x[b] * x[b]) / std::sqrt(2 * M_PI);
  }
  auto* bars = new QCPBars(m_hist->xAxis, m_hist->yAxis);
  bars->setWidth(bw);
  bars->setData(x, m_histCounts, true);
  bars->setPen(Qt::NoPen);
  bars->setBrush(QColor(70, 130, 180, 170));
  bars->setName(tr("\u03c7"));
  m_histTitle->setText(tr("\u03c7 mean %1   \u03c3 %2   (%3 px)")
                           .arg(m_stats.mean, 0, 'f', 3)
                           .arg(m_stats.sigma, 0, 'f', 3)
                           .arg(m_stats.n));
  QCPGraph* gauss = m_hist->addGraph();
  gauss->setData(x, g, true);
  gauss->setPen(QPen(QColor(200, 30, 30), 1.5));
  gauss->setName(tr("N(0, 1)"));
  m_hist->xAxis->setRange(-kChiLimit, kChiLimit);
  m_hist->yAxis->rescale();
  m_hist->yAxis->setRangeLower(0);
  m_hist->replot(QCustomPlot::rpQueuedReplot);
}

} // namespace spex
