// EngineComparisonView: two extractions of the same frame or selection, normally CPU
// and CUDA, side by side: the difference spectrum of a fiber in units of sigma
// ((fa - fb) / sqrt(1/ia + 1/ib), the pull compareFrames counts), the difference of
// the two CCD model images, and the agreement table of core/extract/compare (the
// same numbers `spexlab-cli compare` prints) with the speed-up of b over a.
#pragma once

#include "core/extract/compare.h"

#include <QImage>
#include <QWidget>

#include <memory>
#include <optional>

class QCustomPlot;
class QLabel;
class QSpinBox;
class QTableWidget;

namespace spex {

class EngineComparisonView : public QWidget {
  Q_OBJECT
public:
  explicit EngineComparisonView(QWidget* parent = nullptr);

  // wallA/wallB: seconds of each run (<= 0: taken from the results' profiles).
  // Frames that cannot be compared (shape or grid) show the reason instead.
  void setResults(std::shared_ptr<const ExtractionResult> a, std::shared_ptr<const ExtractionResult> b,
                  double wallA = 0, double wallB = 0);
  // Nothing to compare (e.g. "CUDA is not available: ..."), shown in place of the table.
  void showMessage(const QString& message);

  void setFiber(int fiber); // a fiber number of the frames
  int fiber() const { return m_fiber; }

  bool hasComparison() const { return m_comparison.has_value(); }
  const FrameComparison& comparison() const { return *m_comparison; }
  double wallA() const { return m_wallA; }
  double wallB() const { return m_wallB; }
  double speedup() const { return m_wallB > 0 ? m_wallA / m_wallB : 0; }
  QString message() const;

  QTableWidget* table() const { return m_table; }
  QCustomPlot* plot() const { return m_plot; }
  // The model difference a - b over the CCD box both models touch (null without models).
  const QImage& differenceImage() const { return m_diffImage; }
  double differenceMax() const { return m_diffMax; }
  double differenceScale() const { return m_diffScale; } // |a - b| at the ends of the colour bar

  // Signed pull per bin of one fiber, NaN where a bin is not compared (uncovered or
  // ivar <= 0 in either run), +Inf where compared but not finite: core binPull.
  static QVector<double> pullSpectrum(const ExtractionResult& a, const ExtractionResult& b, int fiber);

protected:
  bool eventFilter(QObject* watched, QEvent* event) override;

private:
  void rescaleDifferenceImage();
  void fillTable();
  void updatePlot();
  void updateDifferenceImage();

  std::shared_ptr<const ExtractionResult> m_a, m_b;
  std::optional<FrameComparison> m_comparison;
  double m_wallA = 0, m_wallB = 0;
  int m_fiber = -1;
  QImage m_diffImage;
  double m_diffMax = 0, m_diffScale = 0;

  QLabel* m_title;
  QSpinBox* m_fiberBox;
  QCustomPlot* m_plot;
  QLabel* m_image;
  QLabel* m_imageCaption;
  QTableWidget* m_table;
};

} // namespace spex
