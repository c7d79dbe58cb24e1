#include "image_tools.h"

#include "document.h"

#include "widgets/ccd_view.h"
#include "widgets/cut_view.h"
#include "widgets/region_stats.h"
#include "widgets/residual_view.h"
#include "widgets/side_by_side_view.h"

#include <QAction>
#include <QActionGroup>
#include <QDockWidget>
#include <QMainWindow>
#include <QMenu>
#include <QMenuBar>
#include <QSettings>
#include <QSplitter>
#include <QToolBar>

namespace spex {

void installImageTools(const WorkbenchContext& context) {
  if (!ImageTools::of(context.host)) new ImageTools(context);
}

ImageTools* ImageTools::of(QMainWindow* window) {
  return window ? window->findChild<ImageTools*>(QString(), Qt::FindDirectChildrenOnly) : nullptr;
}

ImageTools::ImageTools(const WorkbenchContext& context) : QObject(context.host), m_ctx(context) {
  buildActions();
  buildDocks();
  Document* doc = m_ctx.document;
  connect(doc, &Document::inputsChanged, this, [this] {
    m_ctx.ccd->clearRegions();
    m_stats->setRegion({});
    m_cutView->setCut({});
    refreshInputs();
  });
  connect(doc, &Document::resultsChanged, this, &ImageTools::refreshInputs);
  connect(m_ctx.residuals, &ResidualView::updated, this, &ImageTools::refreshInputs);
  connect(m_ctx.ccd, &ImageCanvas::boxRegionChanged, m_stats, [this](QRectF r) {
    m_stats->setRegion(r);
    m_regionDock->show();
    m_regionDock->raise();
  });
  connect(m_ctx.ccd, &ImageCanvas::cutChanged, m_cutView, [this](QLineF l) {
    m_cutView->setCut(l);
    m_regionDock->show();
    m_regionDock->raise();
  });
  connect(m_sideDock, &QDockWidget::visibilityChanged, this, [this](bool) { refreshInputs(); });
  refreshInputs();
}

void ImageTools::buildActions() {
  QMainWindow* w = m_ctx.host;
  auto* group = new QActionGroup(this);
  auto tool = [&](const QString& text, const QString& name, QKeySequence key, ImageCanvas::Tool t,
                  const QString& tip) {
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    a->setCheckable(true);
    a->setShortcut(key);
    a->setToolTip(tip);
    group->addAction(a);
    connect(a, &QAction::triggered, this, [this, t] { m_ctx.ccd->setTool(t); });
    return a;
  };
  m_navigate = tool(tr("Navigate"), QStringLiteral("toolNavigate"), QKeySequence(Qt::Key_N),
                    ImageCanvas::Tool::Navigate, tr("Drag pans, click selects a fiber (N)"));
  m_box = tool(tr("Box"), QStringLiteral("toolBox"), QKeySequence(Qt::Key_B), ImageCanvas::Tool::Box,
               tr("Drag a box on the CCD: its statistics show in the Region dock (B)"));
  m_cut = tool(tr("Cut"), QStringLiteral("toolCut"), QKeySequence(Qt::Key_X), ImageCanvas::Tool::Cut,
               tr("Drag a line across the traces: data and model along it in the Region dock (X)"));
  m_navigate->setChecked(true);

  m_invert = new QAction(tr("Invert"), this);
  m_invert->setObjectName(QStringLiteral("invertColormap"));
  m_invert->setCheckable(true);
  m_invert->setShortcut(QKeySequence(Qt::Key_I));
  m_invert->setToolTip(tr("Read the colormap backwards (I)"));
  m_invert->setChecked(m_ctx.scale().inverted);
  connect(m_invert, &QAction::toggled, this, [this](bool on) {
    ScaleSettings s = m_ctx.scale();
    if (s.inverted == on) return;
    s.inverted = on;
    m_ctx.setScale(s);
  });
  m_reset = new QAction(tr("Reset contrast"), this);
  m_reset->setObjectName(QStringLiteral("resetContrastBias"));
  m_reset->setToolTip(tr("Contrast and bias back to normal (right-drag on an image changes them: "
                         "horizontally the bias, vertically the contrast)"));
  connect(m_reset, &QAction::triggered, this, [this] {
    ScaleSettings s = m_ctx.scale();
    s.contrast = 1.0;
    s.bias = 0.5;
    m_ctx.setScale(s);
    m_ctx.residuals->canvas()->resetContrastBias();
  });

  auto toggle = [&](const QString& text, const QString& name, bool on, auto apply) {
    auto* a = new QAction(text, this);
    a->setObjectName(name);
    a->setCheckable(true);
    a->setChecked(QSettings().value(QStringLiteral("image/") + name, on).toBool());
    connect(a, &QAction::toggled, this, [this, apply, name](bool v) {
      QSettings().setValue(QStringLiteral("image/") + name, v);
      for (ImageCanvas* c : m_ctx.host->findChildren<ImageCanvas*>()) (c->*apply)(v);
    });
    return a;
  };
  m_colorBar = toggle(tr("Colour bar"), QStringLiteral("colorBar"), true, &ImageCanvas::setColorBarVisible);
  m_axes = toggle(tr("Pixel axes"), QStringLiteral("pixelAxes"), true, &ImageCanvas::setPixelAxes);
  m_panner = toggle(tr("Panner"), QStringLiteral("panner"), true, &ImageCanvas::setPannerEnabled);
  m_panner->setToolTip(tr("A small overview of the whole image when zoomed in; click or drag in it to pan"));

  QToolBar* bar = w->addToolBar(tr("Image"));
  bar->setObjectName(QStringLiteral("imageToolbar"));
  bar->setToolButtonStyle(Qt::ToolButtonTextOnly);
  for (QAction* a : {m_navigate, m_box, m_cut}) bar->addAction(a);
  bar->addSeparator();
  for (QAction* a : {m_invert, m_reset}) bar->addAction(a);
  bar->addSeparator();
  for (QAction* a : {m_colorBar, m_axes, m_panner}) bar->addAction(a);

  // The View menu lists them too (the toolbar can be hidden).
  for (QAction* m : w->menuBar()->actions())
    if (m->menu() && m->text() == tr("&View")) {
      QMenu* sub = m->menu()->addMenu(tr("&Image tools"));
      for (QAction* a : {m_navigate, m_box, m_cut, m_invert, m_reset, m_colorBar, m_axes, m_panner})
        sub->addAction(a);
    }
}

void ImageTools::buildDocks() {
  QMainWindow* w = m_ctx.host;
  m_stats = new RegionStatsView(w);
  m_stats->setObjectName(QStringLiteral("regionStats"));
  m_cutView = new CutView(m_ctx.state, w);
  m_cutView->setObjectName(QStringLiteral("cutView"));
  auto* split = new QSplitter(Qt::Vertical, w);
  split->addWidget(m_stats);
  split->addWidget(m_cutView);
  split->setStretchFactor(0, 2);
  split->setStretchFactor(1, 3);
  m_regionDock = new QDockWidget(tr("Region"), w);
  m_regionDock->setObjectName(QStringLiteral("regionDock"));
  m_regionDock->setWidget(split);
  w->addDockWidget(Qt::RightDockWidgetArea, m_regionDock);
  if (auto* res = w->findChild<QDockWidget*>(QStringLiteral("residualsDock"))) w->tabifyDockWidget(res, m_regionDock);
  // Tabifying brings the new tab to the front; the Resolution tab stays there (a box
  // or cut drawn on the CCD raises the Region tab).
  if (auto* r = w->findChild<QDockWidget*>(QStringLiteral("resolutionDock"))) r->raise();

  m_sideBySide = new SideBySideView(m_ctx.state, w);
  m_sideBySide->setObjectName(QStringLiteral("sideBySide"));
  m_sideDock = new QDockWidget(tr("Side by side"), w);
  m_sideDock->setObjectName(QStringLiteral("sideBySideDock"));
  m_sideDock->setWidget(m_sideBySide);
  w->addDockWidget(Qt::BottomDockWidgetArea, m_sideDock);
  if (auto* spec = w->findChild<QDockWidget*>(QStringLiteral("spectrumDock"))) {
    w->tabifyDockWidget(spec, m_sideDock);
    spec->raise();
  }
  connect(m_sideBySide, &SideBySideView::updated, this, [this] {
    for (ImageCanvas* c : {m_sideBySide->canvas(0), m_sideBySide->canvas(1), m_sideBySide->canvas(2)}) {
      c->setColorBarVisible(m_colorBar->isChecked());
      c->setPixelAxes(m_axes->isChecked());
      c->setPannerEnabled(m_panner->isChecked());
    }
  });
  for (ImageCanvas* c : w->findChildren<ImageCanvas*>()) {
    c->setColorBarVisible(m_colorBar->isChecked());
    c->setPixelAxes(m_axes->isChecked());
    c->setPannerEnabled(m_panner->isChecked());
  }
  for (QAction* m : w->menuBar()->actions())
    if (m->menu() && m->text() == tr("&View"))
      for (QDockWidget* d : {m_regionDock, m_sideDock}) m->menu()->addAction(d->toggleViewAction());
}

void ImageTools::refreshInputs() {
  Document* doc = m_ctx.document;
  const auto image = doc->image();
  const QString name = doc->modelSource();
  const auto model = name.isEmpty() ? nullptr : doc->model(name);
  m_stats->setInputs(image, model, name);
  m_cutView->setTraces(&m_ctx.ccd->traces());
  m_cutView->setInputs(image, model, name);
  // Side by side shows the arrays the residual view computed (its chi), once they
  // are in; until then the data alone.
  ResidualView* res = m_ctx.residuals;
  // Only while its dock is shown: holding the residual view's chi makes that view copy
  // it (copy-on-write, a CCD of doubles) at every in-place update, i.e. every click.
  if (!m_sideDock->isVisible() || m_sideBySide->visibleRegion().isEmpty()) { // also a tab behind another
    m_sideBySide->setInputs(nullptr, nullptr, nullptr, m_ctx.scale());
    return;
  }
  if (res->image() == image && res->model() == model && !res->isUpdating() && (!model || res->chi()))
    m_sideBySide->setInputs(image, model, res->chi(), res->dataScale(), doc->modelRevision());
  else if (!model)
    m_sideBySide->setInputs(image, nullptr, nullptr, m_ctx.scale());
}

} // namespace spex
