// CutView: the cross-dispersion cut (issue 14), the first thing a spectroscopist draws
// across traces: data and, where an extraction made one, the model sampled along a
// line drawn on the CCD (the Cut tool), with the fiber traces it crosses marked.
#pragma once

#include "trace_geometry.h"

#include "core/array.h"
#include "core/image.h"

#include <QLineF>
#include <QPointer>
#include <QVector>
#include <QWidget>

#include <memory>

class QCustomPlot;
class QLabel;

namespace spex {

class ViewState;

// Bilinear interpolation of a at CCD point (x = column, y = row; pixel centres at
// integers); NaN outside the image.
double sampleBilinear(const Array2D<double>& a, double x, double y);

class CutView : public QWidget {
  Q_OBJECT
public:
  explicit CutView(ViewState* state, QWidget* parent = nullptr);

  void setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                 const QString& modelName);
  void setTraces(const TraceGeometry* traces); // not owned; null: no fiber marks
  void setCut(const QLineF& ccd);              // null line: none
  QLineF cut() const { return m_cut; }

  // What is plotted: distance from the cut's start (px) and the profiles along it.
  const QVector<double>& distance() const { return m_dist; }
  const QVector<double>& dataProfile() const { return m_data; }
  const QVector<double>& modelProfile() const { return m_model; } // empty without a model
  // Where the cut crosses fiber traces: (distance, PSF fiber index), in order.
  const QVector<QPair<double, int>>& crossings() const { return m_crossings; }
  QCustomPlot* plot() const { return m_plot; }

  static constexpr double kStep = 0.25; // sampling step along the cut, px

private:
  void recompute();

  QPointer<ViewState> m_state;
  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const Array2D<double>> m_modelImage;
  QString m_modelName;
  const TraceGeometry* m_traces = nullptr;
  QLineF m_cut;
  QVector<double> m_dist, m_data, m_model;
  QVector<QPair<double, int>> m_crossings;
  QLabel* m_label = nullptr;
  QCustomPlot* m_plot = nullptr;
  bool m_shownEmpty = false, m_shownEmptyImage = false; // the "no cut" state is on screen
};

} // namespace spex
