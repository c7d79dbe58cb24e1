// The image tools of the workbench (issue 14), installed on the host window by
// installImageTools from a WorkbenchContext: the Image toolbar (Navigate / Box / Cut
// tools, inverted colormap, contrast-bias reset, colour bars, pixel axes, overview
// panner), the Region dock (box
// statistics and the cross-dispersion cut plot) and the Side by side dock (data |
// model | chi with a locked crosshair). The views live in widgets/; this file wires
// them to the document and the CCD and residual views.
#pragma once

#include "workbench_context.h"

#include <QObject>

class QAction;
class QDockWidget;
class QMainWindow;

namespace spex {

class CutView;
class RegionStatsView;
class SideBySideView;

void installImageTools(const WorkbenchContext& context);

class ImageTools : public QObject {
  Q_OBJECT
public:
  explicit ImageTools(const WorkbenchContext& context);
  static ImageTools* of(QMainWindow* window);

  QAction* navigateAction() const { return m_navigate; }
  QAction* boxAction() const { return m_box; }
  QAction* cutAction() const { return m_cut; }
  QAction* invertAction() const { return m_invert; }
  QAction* resetContrastAction() const { return m_reset; }
  QAction* colorBarAction() const { return m_colorBar; }
  QAction* axesAction() const { return m_axes; }
  QAction* pannerAction() const { return m_panner; }
  RegionStatsView* regionStats() const { return m_stats; }
  CutView* cutView() const { return m_cutView; }
  SideBySideView* sideBySide() const { return m_sideBySide; }
  QDockWidget* regionDock() const { return m_regionDock; }
  QDockWidget* sideBySideDock() const { return m_sideDock; }

private:
  void buildActions();
  void buildDocks();
  void refreshInputs(); // image and model from the document and the residual view

  WorkbenchContext m_ctx;
  QAction* m_navigate = nullptr;
  QAction* m_box = nullptr;
  QAction* m_cut = nullptr;
  QAction* m_invert = nullptr;
  QAction* m_reset = nullptr;
  QAction* m_colorBar = nullptr;
  QAction* m_axes = nullptr;
  QAction* m_panner = nullptr;
  RegionStatsView* m_stats = nullptr;
  CutView* m_cutView = nullptr;
  SideBySideView* m_sideBySide = nullptr;
  QDockWidget* m_regionDock = nullptr;
  QDockWidget* m_sideDock = nullptr;
};

} // namespace spex
