// The image tools of the workbench (issue 14), installed on the MainWindow by
// installImageTools: the Image toolbar (Navigate / Box / Cut tools, inverted colormap,
// contrast-bias reset, colour bars, pixel axes, overview panner), the Region dock (box
// statistics and the cross-dispersion cut plot) and the Side by side dock (data |
// model | chi with a locked crosshair). The views live in widgets/; this file wires
// them to the document and the CCD and residual views.
#pragma once

#include <QObject>

class QAction;
class QDockWidget;

namespace spex {

class CutView;
class MainWindow;
class RegionStatsView;
class SideBySideView;

void installImageTools(MainWindow* window);

class ImageTools : public QObject {
  Q_OBJECT
public:
  explicit ImageTools(MainWindow* window);
  static ImageTools* of(MainWindow* window);

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

  MainWindow* m_window;
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
