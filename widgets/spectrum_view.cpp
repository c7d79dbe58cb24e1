#include "spectrum_view.h"

#include <qcustomplot.h>

#include <QCheckBox>
#include <QFile>
#include <QHBoxLayout>
#include <QLabel>
#include <QMenu>
#include <QToolButton>
#include <QTextStream>
#include <QVBoxLayout>

#include <cmath>
#include <limits>

namespace spex {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Distinct, colour-blind-friendly hues for up to eight fibers.
const QColor kFiberColors[] = {QColor(31, 119, 180), QColor(214, 39, 40),  QColor(44, 160, 44),
                               QColor(148, 103, 189), QColor(255, 127, 14), QColor(23, 190, 207),
                               QColor(140, 86, 75),  QColor(227, 119, 194)};

Qt::PenStyle sourceStyle(int i) {
  static const Qt::PenStyle styles[] = {Qt::SolidLine, Qt::DashLine, Qt::DotLine, Qt::DashDotLine};
  return styles[i % 4];
}

bool coveredBin(const ExtractionResult& r, int row, int j) {
  return r.covered.empty() || r.covered(row, j);
}

} // namespace

SpectrumView::SpectrumView(ViewState* state, QWidget* parent) : QWidget(parent), m_state(state) {
  m_plot = new QCustomPlot(this);
  m_plot->setObjectName(QStringLiteral("spectrumPlot"));
  // QCustomPlot's default (phImmediateRefresh) makes every replot a synchronous
  // repaint() of the window's dirty widgets; an update() lets the plots, the CCD view
  // and the status bar that one extraction changes paint in one pass.
  m_plot->setPlottingHint(QCP::phImmediateRefresh, false);
  m_plot->plotLayout()->clear();
  m_fluxRect = new QCPAxisRect(m_plot);
  m_ivarRect = new QCPAxisRect(m_plot);
  m_chiRect = new QCPAxisRect(m_plot);
  m_plot->plotLayout()->addElement(0, 0, m_fluxRect);
  m_plot->plotLayout()->addElement(1, 0, m_ivarRect);
  m_plot->plotLayout()->addElement(2, 0, m_chiRect);
  m_plot->plotLayout()->setRowStretchFactors({3.0, 1.0, 1.0});
  m_plot->plotLayout()->setRowSpacing(0);
  auto* group = new QCPMarginGroup(m_plot);
  const QCPAxisRect* rects[] = {m_fluxRect, m_ivarRect, m_chiRect};
  const char* labels[] = {"flux [e\u207b/\u00c5]", "ivar", "\u03c7\u00b2/pix"};
  for (int i = 0; i < 3; ++i) {
    auto* r = const_cast<QCPAxisRect*>(rects[i]);
    r->setMarginGroup(QCP::msLeft | QCP::msRight, group);
    r->axis(QCPAxis::atLeft)->setLabel(QString::fromUtf8(labels[i]));
    // Wavelength only: the flux axes follow the data in view (autoscaleValues), so
    // zooming in on a line never cuts its peak off.
    r->setRangeDrag(Qt::Horizontal);
    r->setRangeZoom(Qt::Horizontal);
    if (i < 2) r->axis(QCPAxis::atBottom)->setTickLabels(false);
    // Few ticks on the short tracks, so their labels never run into each other.
    r->axis(QCPAxis::atLeft)->ticker()->setTickCount(i == 0 ? 4 : 2);
    // Every track shares the flux x range.
    for (int j = 0; j < 3; ++j) {
      if (i == j) continue;
      connect(r->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
              const_cast<QCPAxisRect*>(rects[j])->axis(QCPAxis::atBottom),
              qOverload<const QCPRange&>(&QCPAxis::setRange));
    }
    m_cursor[i] = new QCPItemStraightLine(m_plot);
    m_hover[i] = new QCPItemStraightLine(m_plot);
    for (QCPItemStraightLine* line : {m_cursor[i], m_hover[i]}) {
      line->setClipAxisRect(r);
      for (QCPItemPosition* pos : {line->point1, line->point2}) {
        pos->setAxisRect(r);
        pos->setAxes(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
      }
      line->setVisible(false);
    }
    m_cursor[i]->setPen(QPen(QColor(230, 160, 0), 1.5));
    m_hover[i]->setPen(QPen(QColor(120, 120, 120), 1, Qt::DashLine));
  }
  m_chiRect->axis(QCPAxis::atBottom)->setLabel(QStringLiteral("wavelength [\u00c5]"));
  // The legend sits in its own row above the tracks, never over the data.
  auto* legend = new QCPLegend;
  m_plot->plotLayout()->insertRow(0);
  m_plot->plotLayout()->addElement(0, 0, legend);
  m_plot->plotLayout()->setRowStretchFactors({0.001, 3.0, 1.0, 1.0});
  legend->setLayer(QStringLiteral("legend"));
  legend->setFont(QFont(font().family(), 8));
  legend->setFillOrder(QCPLayoutGrid::foColumnsFirst);
  legend->setWrap(4);
  legend->setBorderPen(Qt::NoPen);
  legend->setMargins(QMargins(2, 1, 2, 1));
  m_plot->legend = legend;
  m_plot->setInteractions(QCP::iRangeDrag | QCP::iRangeZoom);
  m_plot->setMinimumHeight(220);

  connect(m_plot, &QCustomPlot::mouseMove, this, &SpectrumView::onMouseMove);
  connect(m_plot, &QCustomPlot::mousePress, this, &SpectrumView::onMousePress);
  connect(m_plot, &QCustomPlot::mouseWheel, this, [this] { m_userZoomed = true; });
  // After every wavelength change (wheel, drag, reset) the flux axes fit what is shown.
  connect(m_fluxRect->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged), this,
          [this] { autoscaleValues(); });
  connect(m_plot, &QCustomPlot::mouseDoubleClick, this, [this] { resetView(); });

  m_resetAction = new QAction(tr("Reset zoom (whole extracted range)"), this);
  connect(m_resetAction, &QAction::triggered, this, &SpectrumView::resetView);
  m_bandAction = new QAction(tr("\u00b11\u03c3 band"), this);
  m_truthAction = new QAction(tr("Truth"), this);
  m_legendAction = new QAction(tr("Legend"), this);
  for (QAction* a : {m_bandAction, m_truthAction, m_legendAction}) {
    a->setCheckable(true);
    a->setChecked(true);
  }
  connect(m_legendAction, &QAction::toggled, this, [this] { rebuild(false); });
  m_plot->setContextMenuPolicy(Qt::CustomContextMenu);
  connect(m_plot, &QWidget::customContextMenuRequested, this, [this](const QPoint& at) {
    QMenu menu(this);
    menu.addActions(contextActions());
    menu.exec(m_plot->mapToGlobal(at));
  });

  m_showBand = new QCheckBox(tr("\u00b11\u03c3 band"), this);
  m_showBand->setChecked(true);
  m_showTruth = new QCheckBox(tr("truth"), this);
  m_showTruth->setChecked(true);
  m_info = new QLabel(this);
  m_info->setTextInteractionFlags(Qt::TextSelectableByMouse);
  m_info->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
  for (QCheckBox* b : {m_showBand, m_showTruth})
    connect(b, &QCheckBox::toggled, this, [this] { rebuild(false); });
  // The menu's toggles and the check boxes are one setting each.
  connect(m_bandAction, &QAction::toggled, m_showBand, &QCheckBox::setChecked);
  connect(m_showBand, &QCheckBox::toggled, m_bandAction, &QAction::setChecked);
  connect(m_truthAction, &QAction::toggled, m_showTruth, &QCheckBox::setChecked);
  connect(m_showTruth, &QCheckBox::toggled, m_truthAction, &QAction::setChecked);
  auto* reset = new QToolButton(this);
  reset->setText(tr("Reset zoom"));
  reset->setToolTip(tr("Whole extracted range, flux axes fitted (also: double-click the plot)"));
  connect(reset, &QToolButton::clicked, this, &SpectrumView::resetView);

  m_hint = new QLabel(this);
  m_hint->setObjectName(QStringLiteral("spectrumHint"));
  m_hint->setAlignment(Qt::AlignCenter);
  m_hint->setWordWrap(true);
  m_hint->setStyleSheet(QStringLiteral("color: #555; font-size: 11pt; padding: 12px;"));
  m_hint->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Expanding);

  auto* bar = new QHBoxLayout;
  bar->addWidget(m_showBand);
  bar->addWidget(m_showTruth);
  bar->addWidget(reset);
  bar->addWidget(m_info, 1);
  auto* lay = new QVBoxLayout(this);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(bar);
  lay->addWidget(m_plot, 1);
  lay->addWidget(m_hint, 1);

  connect(m_state, &ViewState::fibersChanged, this, [this] {
    m_userZoomed = false;
    rebuild(true);
  });
  connect(m_state, &ViewState::waveChanged, this, &SpectrumView::updateCursor);
  connect(m_state, &ViewState::hoverChanged, this, &SpectrumView::updateCursor);
}

void SpectrumView::setSources(const QVector<SpectrumSource>& sources) {
  m_sources = sources;
  rebuild(!m_userZoomed);
}

void SpectrumView::setTruth(std::shared_ptr<const Truth> truth) {
  m_truth = std::move(truth);
  m_showTruth->setEnabled(bool(m_truth));
  rebuild(!m_userZoomed);
}

void SpectrumView::refresh() { rebuild(!m_userZoomed); }

QCPGraph* SpectrumView::fluxGraph(const QString& source, int fiber) const {
  for (const Key& k : m_fluxGraphs)
    if (k.source == source && k.fiber == fiber) return k.graph;
  return nullptr;
}

QCPGraph* SpectrumView::truthGraph(int fiber, bool convolved) const {
  const QString which = convolved ? QStringLiteral("convolved") : QStringLiteral("plain");
  for (const Key& k : m_truthGraphs)
    if (k.source == which && k.fiber == fiber) return k.graph;
  return nullptr;
}

void SpectrumView::rebuild(bool rescale) {
  m_plot->clearGraphs();
  m_fluxGraphs.clear();
  m_truthGraphs.clear();
  QVector<int> fibers = m_state->selectedFibers();
  if (fibers.size() > maxFibers()) fibers = fibers.mid(fibers.size() - maxFibers());
  m_shownFibers = fibers;

  auto axes = [](QCPAxisRect* r) {
    return std::make_pair(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
  };
  for (int fi = 0; fi < fibers.size(); ++fi) {
    const int fiber = fibers[fi];
    const QColor color = kFiberColors[fi % 8];
    const ExtractionResult* first = nullptr;
    for (int si = 0; si < m_sources.size(); ++si) {
      const auto& src = m_sources[si];
      if (!src.result) continue;
      const ExtractionResult& r = *src.result;
      const int row = fiber - r.fiberMin;
      if (row < 0 || row >= r.nfiber || r.flux.empty()) continue;
      if (!first) first = &r;
      const int nw = r.nwave;
      QVector<double> x(nw), f(nw), lo(nw), hi(nw), iv(nw), chi(nw), mx, my;
      for (int j = 0; j < nw; ++j) {
        x[j] = r.wave.at(j);
        const bool c = coveredBin(r, row, j);
        const double ivar = r.ivar(row, j);
        f[j] = c ? r.flux(row, j) : kNaN;
        const double sig = c && ivar > 0 ? 1.0 / std::sqrt(ivar) : kNaN;
        lo[j] = f[j] - sig;
        hi[j] = f[j] + sig;
        iv[j] = c ? ivar : kNaN;
        chi[j] = c && !r.chi2pix.empty() ? r.chi2pix(row, j) : kNaN;
        if (c && !r.mask.empty() && r.mask(row, j)) {
          mx.push_back(x[j]);
          my.push_back(f[j]);
        }
      }
      // Width 1: Qt's raster engine strokes wider pens as antialiased outlines, ~8x
      // the cost of a 1 px line (a replot per extraction; see docs/benchmarks.md).
      QPen pen(color, 1.0, sourceStyle(si));
      if (m_showBand->isChecked()) {
        auto [xa, ya] = axes(m_fluxRect);
        QCPGraph* gl = m_plot->addGraph(xa, ya);
        QCPGraph* gh = m_plot->addGraph(xa, ya);
        gl->setData(x, lo, true);
        gh->setData(x, hi, true);
        gl->setPen(Qt::NoPen);
        gh->setPen(Qt::NoPen);
        QColor band = color;
        band.setAlpha(si == 0 ? 50 : 30);
        gh->setBrush(band);
        // A translucent band needs no antialiased edges; they cost 5x the fill.
        gh->setAntialiasedFill(false);
        gh->setChannelFillGraph(gl);
        gl->removeFromLegend();
        gh->removeFromLegend();
      }
      auto [xa, ya] = axes(m_fluxRect);
      QCPGraph* g = m_plot->addGraph(xa, ya);
      g->setName(QStringLiteral("%1, fiber %2").arg(QString::fromStdString(src.name)).arg(m_state->fiberNumber(fiber)));
      g->setData(x, f, true);
      g->setPen(pen);
      m_fluxGraphs.push_back({QString::fromStdString(src.name), fiber, g});
      if (!mx.isEmpty()) {
        QCPGraph* gm = m_plot->addGraph(xa, ya);
        gm->setData(mx, my, true);
        gm->setLineStyle(QCPGraph::lsNone);
        gm->setScatterStyle(QCPScatterStyle(QCPScatterStyle::ssCross, QColor(220, 0, 0), 6));
        gm->setName(QStringLiteral("masked bins"));
        if (fi > 0 || si > 0) gm->removeFromLegend();
      }
      auto [xi, yi] = axes(m_ivarRect);
      QCPGraph* gi = m_plot->addGraph(xi, yi);
      gi->setData(x, iv, true);
      gi->setPen(pen);
      gi->removeFromLegend();
      auto [xc, yc] = axes(m_chiRect);
      QCPGraph* gc = m_plot->addGraph(xc, yc);
      gc->setData(x, chi, true);
      gc->setPen(pen);
      gc->removeFromLegend();
    }
    if (m_truth && m_showTruth->isChecked()) {
      QVector<double> conv, plain, x;
      bool have = false;
      if (first) {
        have = truthOnGrid(*m_truth, *first, fiber, &conv, &plain);
        for (int j = 0; j < first->nwave; ++j) x.push_back(first->wave.at(j));
      } else {
        const int row = fiber - m_truth->fiberMin;
        if (row >= 0 && row < m_truth->phot.rows && m_truth->wave.size() > 1) {
          const double dwt = m_truth->wave[1] - m_truth->wave[0];
          for (int j = 0; j < int(m_truth->wave.size()) && j < m_truth->phot.cols; ++j) {
            x.push_back(m_truth->wave[j]);
            plain.push_back(m_truth->phot(row, j) / dwt);
          }
          have = true;
        }
      }
      if (have) {
        auto [xa, ya] = axes(m_fluxRect);
        QCPGraph* gp = m_plot->addGraph(xa, ya);
        gp->setData(x, plain, true);
        // Each fiber's truth in its own colour: plain thin and light, truth (x) R dashed.
        QColor light = color.lighter(150);
        light.setAlpha(170);
        gp->setPen(QPen(light, 1));
        gp->setName(QStringLiteral("truth, fiber %1").arg(m_state->fiberNumber(fiber)));
        m_truthGraphs.push_back({QStringLiteral("plain"), fiber, gp});
        if (!conv.isEmpty()) {
          QCPGraph* gcv = m_plot->addGraph(xa, ya);
          gcv->setData(x, conv, true);
          gcv->setPen(QPen(color.darker(160), 1.4, fi % 2 ? Qt::DashDotLine : Qt::DashLine));
          gcv->setName(QStringLiteral("truth \u2297 R, fiber %1").arg(m_state->fiberNumber(fiber)));
          m_truthGraphs.push_back({QStringLiteral("convolved"), fiber, gcv});
        }
      }
    }
  }
  if (rescale) {
    // x: where the extracted spectra have numbers (else the truth); y: what is
    // inside that x range, so a partly extracted fiber is not flattened by the
    // truth's lines elsewhere.
    auto keyRange = [](const QList<QCPGraph*>& graphs, bool* found) {
      QCPRange xr;
      *found = false;
      for (QCPGraph* g : graphs) {
        bool f = false;
        const QCPRange gx = g->getKeyRange(f);
        if (!f) continue;
        if (!*found) xr = gx;
        else xr.expand(gx);
        *found = true;
      }
      return xr;
    };
    QList<QCPGraph*> data;
    for (const Key& k : m_fluxGraphs) data << k.graph;
    bool found = false;
    QCPRange xr = keyRange(data, &found);
    if (!found) xr = keyRange(m_fluxRect->graphs(), &found);
    if (found) m_fluxRect->axis(QCPAxis::atBottom)->setRange(xr); // the others follow
  }
  autoscaleValues();
  m_plot->legend->setVisible(!m_fluxGraphs.isEmpty() && m_legendAction->isChecked());
  // Never empty axes: say how to get something to show.
  const bool empty = m_plot->graphCount() == 0;
  if (empty) {
    const int fiber = m_state->selectedFiber();
    m_hint->setText(fiber >= 0
                        ? tr("Fiber %1 is selected but not extracted yet.\n\nPress \u201cExtract selection\u201d "
                             "(Ctrl+R) in the toolbar, or \u201cExtract whole frame\u201d (Ctrl+Shift+R).").arg(fiber)
                        : tr("No spectrum yet.\n\nClick a fiber trace on the CCD to select it (shift+drag selects "
                             "patches), then press \u201cExtract selection\u201d (Ctrl+R) in the toolbar."));
  }
  m_hint->setVisible(empty);
  m_plot->setVisible(!empty);
  updateCursor();
}

QString SpectrumView::emptyHint() const { return m_hint->isVisibleTo(this) ? m_hint->text() : QString(); }

QCPLegend* SpectrumView::legend() const { return m_plot->legend; }

QList<QAction*> SpectrumView::contextActions() const {
  return {m_resetAction, m_bandAction, m_truthAction, m_legendAction};
}

void SpectrumView::resetView() {
  m_userZoomed = false;
  rebuild(true);
}

void SpectrumView::autoscaleValues() {
  const QCPRange xr = m_fluxRect->axis(QCPAxis::atBottom)->range();
  for (QCPAxisRect* r : {m_fluxRect, m_ivarRect, m_chiRect}) {
    bool any = false;
    QCPRange yr;
    for (QCPGraph* g : r->graphs()) {
      bool fy = false;
      const QCPRange gy = g->getValueRange(fy, QCP::sdBoth, xr);
      if (!fy) continue;
      if (!any) yr = gy;
      else yr.expand(gy);
      any = true;
    }
    if (any) {
      const double pad = 0.05 * (yr.size() > 0 ? yr.size() : 1.0);
      r->axis(QCPAxis::atLeft)->setRange(yr.lower - pad, yr.upper + pad);
    }
  }
}

void SpectrumView::updateCursor() {
  const double w = m_state->selectedWave();
  const double h = m_state->hoverWave();
  for (int i = 0; i < 3; ++i) {
    m_cursor[i]->setVisible(std::isfinite(w));
    if (std::isfinite(w)) {
      m_cursor[i]->point1->setCoords(w, 0);
      m_cursor[i]->point2->setCoords(w, 1);
    }
    m_hover[i]->setVisible(std::isfinite(h));
    if (std::isfinite(h)) {
      m_hover[i]->point1->setCoords(h, 0);
      m_hover[i]->point2->setCoords(h, 1);
    }
  }
  // One line of numbers at the selected wavelength for the selected fiber.
  QString text;
  const int fiber = m_state->selectedFiber();
  if (fiber >= 0 && std::isfinite(w)) {
    text = QStringLiteral("fiber %1, %2 \u00c5:").arg(m_state->fiberNumber(fiber)).arg(w, 0, 'f', 2);
    for (const auto& src : m_sources) {
      if (!src.result) continue;
      const ExtractionResult& r = *src.result;
      const int row = fiber - r.fiberMin;
      const int j = int(std::lround((w - r.wave.wmin) / r.wave.dw));
      if (row < 0 || row >= r.nfiber || j < 0 || j >= r.nwave || !coveredBin(r, row, j)) continue;
      const double iv = r.ivar(row, j);
      text += QStringLiteral("  %1 %2 \u00b1 %3").arg(QString::fromStdString(src.name)).arg(r.flux(row, j), 0, 'g', 5)
                  .arg(iv > 0 ? 1 / std::sqrt(iv) : kNaN, 0, 'g', 3);
    }
  }
  m_info->setText(text);
  m_plot->replot(QCustomPlot::rpQueuedReplot);
}

double SpectrumView::waveAtPixel(double px) const {
  return m_fluxRect->axis(QCPAxis::atBottom)->pixelToCoord(px);
}

void SpectrumView::onMouseMove(QMouseEvent* e) {
  if (e->buttons() & Qt::LeftButton) m_userZoomed = true; // a drag pans the plot
  bool inside = false;
  for (QCPAxisRect* r : {m_fluxRect, m_ivarRect, m_chiRect})
    if (r->rect().contains(e->pos())) inside = true;
  if (!inside) {
    m_state->setHover(-1, kNaN);
    return;
  }
  m_state->setHover(m_state->selectedFiber(), waveAtPixel(e->position().x()));
}

void SpectrumView::onMousePress(QMouseEvent* e) {
  if (e->button() != Qt::LeftButton) return;
  for (QCPAxisRect* r : {m_fluxRect, m_ivarRect, m_chiRect})
    if (r->rect().contains(e->pos())) {
      m_state->setSelectedWave(waveAtPixel(e->position().x()));
      return;
    }
}

bool SpectrumView::exportCsv(const QString& path, bool allFibers, QString* error) const {
  QFile file(path);
  if (!file.open(QIODevice::WriteOnly | QIODevice::Text)) {
    if (error) *error = QStringLiteral("cannot write '%1': %2").arg(path, file.errorString());
    return false;
  }
  QTextStream out(&file);
  out << "# SpexLab spectra: flux in electron/Angstrom, ivar per Angstrom^2; truth is R-convolved\n";
  out << "source,fiber,wavelength,flux,ivar,mask,chi2pix,truth\n";
  for (const auto& src : m_sources) {
    if (!src.result) continue;
    const ExtractionResult& r = *src.result;
    QVector<int> fibers = m_shownFibers;
    if (allFibers) {
      fibers.clear();
      for (int i = 0; i < r.nfiber; ++i) fibers.push_back(r.fiberMin + i);
    }
    for (int fiber : fibers) {
      const int row = fiber - r.fiberMin;
      if (row < 0 || row >= r.nfiber) continue;
      QVector<double> conv;
      if (m_truth) truthOnGrid(*m_truth, r, fiber, &conv, nullptr);
      for (int j = 0; j < r.nwave; ++j) {
        if (!coveredBin(r, row, j)) continue;
        out << QString::fromStdString(src.name) << ',' << fiber << ',' << QString::number(r.wave.at(j), 'f', 4) << ','
            << QString::number(r.flux(row, j), 'g', 10) << ','
            << QString::number(r.ivar(row, j), 'g', 10) << ','
            << (r.mask.empty() ? 0u : r.mask(row, j)) << ','
            << QString::number(r.chi2pix.empty() ? kNaN : r.chi2pix(row, j), 'g', 6) << ','
            << (j < conv.size() ? QString::number(conv[j], 'g', 10) : QString()) << '\n';
      }
    }
  }
  out.flush();
  if (file.error() != QFile::NoError) {
    if (error) *error = QStringLiteral("writing '%1' failed: %2").arg(path, file.errorString());
    return false;
  }
  return true;
}

} // namespace spex
