// Box-region statistics (issue 14): what DS9's region "statistics" gives, over the
// CCD pixels whose centres fall in a box: N, mean, median, sigma, min and max of the
// data, of the model and of chi = (data - model) sqrt(ivar) where a model exists.
// RegionStatsView shows them as a table beside the CCD (the Region dock).
#pragma once

#include "core/array.h"
#include "core/image.h"

#include <QRect>
#include <QRectF>
#include <QWidget>

#include <memory>

class QLabel;
class QTableWidget;

namespace spex {

struct RegionStats {
  long n = 0;      // pixels used
  long masked = 0; // pixels in the box left out (ivar <= 0 or not finite)
  double mean = 0, median = 0, sigma = 0, min = 0, max = 0; // NaN when n == 0
};

// Columns and rows whose pixel centres (integers) lie in the CCD rectangle, clipped to
// an nx x ny image; empty when none.
QRect pixelsIn(const QRectF& ccd, int nx, int ny);

// Statistics of a over the pixels of `box` (pixelsIn) with weight > 0 when a weight is
// given. sigma is the sample standard deviation (n - 1); the median of an even count
// is the mean of the two middle values.
RegionStats regionStats(const Array2D<double>& a, const QRect& box, const Array2D<double>* weight);
// chi = (data - model) sqrt(ivar) over the pixels of `box` with ivar > 0.
RegionStats chiRegionStats(const Image& image, const Array2D<double>& model, const QRect& box);

class RegionStatsView : public QWidget {
  Q_OBJECT
public:
  explicit RegionStatsView(QWidget* parent = nullptr);

  // model: CCD-sized, or null (the model and chi columns then say so).
  void setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                 const QString& modelName);
  void setRegion(const QRectF& ccd); // empty: no region
  QRect pixels() const { return m_pixels; }

  // Last computed statistics: column 0 data, 1 model, 2 chi (n == 0 when absent).
  RegionStats stats(int column) const { return m_stats[column]; }
  QTableWidget* table() const { return m_table; }
  QString summary() const; // the line above the table

private:
  void recompute();

  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const Array2D<double>> m_model;
  QString m_modelName;
  QRectF m_region;
  QRect m_pixels;
  RegionStats m_stats[3];
  QLabel* m_label = nullptr;
  QTableWidget* m_table = nullptr;
  bool m_tableEmpty = false; // no statistics shown (cleared)
};

} // namespace spex
