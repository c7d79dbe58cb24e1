// ResolutionView: the resolution matrix of the selected fiber. Top, the row of R at
// the selected wavelength as a kernel (weight against bin offset; rows sum to 1);
// bottom, the RESOLUTION diagonals of that fiber as an image (offset against
// wavelength), so a bad patch edge or a broken decorrelation shows at a glance.
#pragma once

#include "core/extract/spectrum_source.h"
#include "view_state.h"

#include <QPointer>
#include <QWidget>

class QCustomPlot;
class QCPColorMap;
class QLabel;

namespace spex {

class ResolutionView : public QWidget {
  Q_OBJECT
public:
  explicit ResolutionView(ViewState* state, QWidget* parent = nullptr);
  void setSources(const QVector<SpectrumSource>& sources);
  void refresh();

  // Row of R at (fiber, wave) for a source: values at offsets -ndiag..ndiag; empty
  // when not covered. R[i, i + d] = RESOLUTION[fiber, ndiag - d, i + d].
  static QVector<double> kernel(const ExtractionResult& r, int fiber, double wave, int* bin = nullptr);

  QCustomPlot* kernelPlot() const { return m_kernel; }
  QCustomPlot* diagonalsPlot() const { return m_diag; }
  // What the view says instead of empty axes; empty when something is drawn.
  QString emptyHint() const;

private:
  QPointer<ViewState> m_state;
  QVector<SpectrumSource> m_sources;
  QCustomPlot* m_kernel = nullptr;
  QCustomPlot* m_diag = nullptr;
  QCPColorMap* m_map = nullptr;
  QLabel* m_title = nullptr;
  QLabel* m_hint = nullptr;
};

} // namespace spex
