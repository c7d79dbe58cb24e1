// SpectrumView: flux with a +-1 sigma band for the selected fibers, with ivar and
// chi2pix tracks below on the same wavelength axis, masked bins marked, the truth
// overlaid when the input is simulated, and every source (CPU, CUDA, a frame file)
// drawn together. A vertical cursor follows the selected wavelength; hovering the
// plot moves the marker on the CCD trace, clicking selects that wavelength.
#pragma once

#include "core/extract/spectrum_source.h"
#include "truth_on_grid.h"
#include "view_state.h"

#include <QPointer>
#include <QWidget>

#include <memory>

class QCustomPlot;
class QCPAxisRect;
class QCPGraph;
class QCPItemStraightLine;
class QAction;
class QCPLegend;
class QLabel;
class QCheckBox;

namespace spex {

class SpectrumView : public QWidget {
  Q_OBJECT
public:
  explicit SpectrumView(ViewState* state, QWidget* parent = nullptr);

  void setSources(const QVector<SpectrumSource>& sources);
  void setTruth(std::shared_ptr<const Truth> truth);
  // Results were filled in place: redraw, keeping the user's zoom.
  void refresh();

  QCustomPlot* plot() const { return m_plot; }
  // The flux graph of (source, fiber), or null: lets tests compare what is drawn.
  QCPGraph* fluxGraph(const QString& source, int fiber) const;
  QCPGraph* truthGraph(int fiber, bool convolved) const;
  int maxFibers() const { return 8; }
  // What the view says instead of empty axes (how to get a spectrum); empty when
  // something is drawn.
  QString emptyHint() const;
  // Navigation: the wheel and a drag move the wavelength axis only; the flux axes
  // follow the data in view (so peaks are never clipped). resetView() shows the
  // whole extracted range again (double-click, context menu, "Reset" button).
  void resetView();
  // The right-click menu's actions (reset, ±1σ band, truth, legend).
  QList<QAction*> contextActions() const;
  QCPLegend* legend() const;
  QCPAxisRect* fluxRect() const { return m_fluxRect; }

  // CSV of the selected fibers (or all fibers of every source when allFibers):
  // source, fiber, wavelength, flux, ivar, mask, chi2pix[, truth].
  bool exportCsv(const QString& path, bool allFibers, QString* error) const;

private:
  void rebuild(bool rescale);
  void updateCursor();
  void onMouseMove(QMouseEvent* e);
  void onMousePress(QMouseEvent* e);
  double waveAtPixel(double px) const;
  void autoscaleValues(); // value axes over the data inside the shown wavelengths

  QPointer<ViewState> m_state;
  QCustomPlot* m_plot = nullptr;
  QCPAxisRect* m_fluxRect = nullptr;
  QCPAxisRect* m_ivarRect = nullptr;
  QCPAxisRect* m_chiRect = nullptr;
  QCPItemStraightLine* m_cursor[3] = {};
  QCPItemStraightLine* m_hover[3] = {};
  QCheckBox* m_showBand = nullptr;
  QCheckBox* m_showTruth = nullptr;
  QLabel* m_info = nullptr;
  QLabel* m_hint = nullptr;
  QAction* m_resetAction = nullptr;
  QAction* m_bandAction = nullptr;
  QAction* m_truthAction = nullptr;
  QAction* m_legendAction = nullptr;
  QVector<SpectrumSource> m_sources;
  std::shared_ptr<const Truth> m_truth;
  QVector<int> m_shownFibers;
  struct Key { QString source; int fiber; QCPGraph* graph; };
  QVector<Key> m_fluxGraphs;
  QVector<Key> m_truthGraphs; // source "plain" or "convolved"
  bool m_userZoomed = false;
};

} // namespace spex
