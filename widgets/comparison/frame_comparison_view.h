// FrameComparisonView: two extractions compared bin by bin, whatever made them (a run
// of either engine, an opened frame such as the pipeline's frame-*.fits, a frame
// file): the difference spectrum in σ of the selected fibers, (fa − fb)/√(1/ia + 1/ib)
// as core/extract/compare's binPull defines it; a fiber × wavelength map of |Δ|/σ
// whose cells select that fiber and wavelength in the shared ViewState (so the CCD
// centres on it and the spectrum view shows it); and the agreement table of
// compareFrames, line for line what `spexlab-cli compare` prints. Results of other
// grids or fibers are compared on their overlap (findOverlap), which the view says;
// when there is none it names what differs.
//
// The comparison is computed when asked and kept as values (pulls and statistics):
// the results may change afterwards (runs merge in place) without the view going
// stale or reading them again.
#pragma once

#include "core/extract/compare.h"
#include "core/psf/gauss_hermite_psf.h"

#include <QWidget>

#include <memory>
#include <optional>

class QCustomPlot;
class QCPItemStraightLine;
class QLabel;
class QTableWidget;

namespace spex {

class PullMapView;
class ViewState;

class FrameComparisonView : public QWidget {
  Q_OBJECT
public:
  explicit FrameComparisonView(ViewState* state, QWidget* parent = nullptr);

  // Where the fibers fall on the CCD, to centre it on a clicked cell (null: no centring).
  void setPsf(std::shared_ptr<const GaussHermitePsf> psf) { m_psf = std::move(psf); }

  // Compares a with b now; false (the reason shown in message()) when they cannot be
  // compared on any overlap.
  bool compare(const QString& labelA, const ExtractionResult& a, const QString& labelB, const ExtractionResult& b);
  // Nothing compared; the text says why or what to do.
  void showMessage(const QString& message);

  bool hasComparison() const { return m_comparison.has_value(); }
  const FrameComparison& comparison() const { return *m_comparison; }
  const FrameOverlap& overlap() const { return m_overlap; }
  // Signed pulls over the overlap, [overlap().nfiber, overlap().nwave].
  const Array2D<double>& pulls() const { return m_pulls; }
  WaveGrid grid() const { return m_grid; } // the overlap's wavelengths (a's grid)
  QString message() const;     // the title line (or why nothing is compared)
  QString overlapNote() const; // empty when the two results had the same shape
  QString labelA() const { return m_labelA; }
  QString labelB() const { return m_labelB; }
  // The table as text, as FrameComparison::toText (and `spexlab-cli compare`) writes it.
  QString tableText() const;

  // The fibers the σ spectrum shows (the selected ones inside the overlap, else the
  // one with the largest |Δ|/σ) and the values drawn for one (NaN: not compared).
  QVector<int> plottedFibers() const { return m_plotted; }
  QVector<double> sigmaSpectrum(int fiber) const;

  PullMapView* map() const { return m_map; }
  QCustomPlot* plot() const { return m_plot; }
  QTableWidget* table() const { return m_table; }

signals:
  void hovered(const QString& readout); // the map's readout under the cursor

private:
  void fillTable();
  void updatePlot();
  void updateMarker();
  void selectCell(int fiber, double wave);

  ViewState* m_state;
  std::shared_ptr<const GaussHermitePsf> m_psf;
  std::optional<FrameComparison> m_comparison;
  FrameOverlap m_overlap;
  Array2D<double> m_pulls;
  WaveGrid m_grid;
  QString m_labelA, m_labelB;
  int m_worstFiber = -1;
  QVector<int> m_plotted;

  QLabel* m_title;
  QLabel* m_note;
  PullMapView* m_map;
  QCustomPlot* m_plot;
  QCPItemStraightLine* m_cursor = nullptr;
  QTableWidget* m_table;
};

} // namespace spex
