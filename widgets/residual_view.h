// ResidualView: data, model, data - model and chi = (data - model) sqrt(ivar) over the
// CCD, sharing the CCD view's zoom and pan through the ViewState, with blink between
// two of them; beside it the chi histogram with the unit Gaussian over it and its
// mean and sigma. A right model (EXTRACTION.md §4.9) gives chi ~ N(0, 1) where the
// extraction fits; structure in chi is PSF error, not noise.
#pragma once

#include "image_canvas.h"
#include "image_scale.h"

#include "core/array.h"
#include "core/image.h"

#include <QPointer>
#include <QWidget>

#include <memory>

class QComboBox;
class QCheckBox;
class QCustomPlot;
class QCPTextElement;
class QSplitter;
class QLabel;
class QTimer;

namespace spex {

struct ChiStats {
  long n = 0;       // pixels used: ivar > 0 and model != 0 (inside some extracted spot)
  double mean = 0;
  double sigma = 0;
};

class ResidualView : public QWidget {
  Q_OBJECT
public:
  enum Mode { Data, Model, Residual, Chi };
  Q_ENUM(Mode)

  explicit ResidualView(ViewState* state, QWidget* parent = nullptr);

  // model: CCD-sized model image of an extraction (ExtractionResult::model) or null.
  void setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                 const QString& modelName);
  void setDataScale(const ScaleSettings& s); // the CCD view's scale for data and model

  void setMode(Mode m);
  Mode mode() const { return m_mode; }
  void setBlink(bool on);
  bool blinking() const;
  void blinkStep(); // show the other image once (the timer calls it)

  ChiStats chiStats() const { return m_stats; }
  ImageCanvas* canvas() const { return m_canvas; }
  QCustomPlot* histogram() const { return m_hist; }
  bool hasModel() const { return bool(m_model); }

signals:
  void readoutChanged(const QString& text);

protected:
  void resizeEvent(QResizeEvent* e) override;

private:
  void rebuild();
  QImage renderMode(Mode m);
  const Array2D<double>* arrayOf(Mode m);
  void computeChi();
  void updateHistogram();

  QPointer<ViewState> m_state;
  ImageCanvas* m_canvas = nullptr;
  QCustomPlot* m_hist = nullptr;
  QCPTextElement* m_histTitle = nullptr;
  QSplitter* m_split = nullptr;
  QComboBox* m_modeBox = nullptr;
  QComboBox* m_blinkWith = nullptr;
  QCheckBox* m_blink = nullptr;
  QLabel* m_note = nullptr;
  QTimer* m_timer = nullptr;

  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const Array2D<double>> m_model;
  QString m_modelName;
  Array2D<double> m_resid; // computed on demand, dropped with the inputs
  Array2D<double> m_chi;
  ScaleSettings m_dataScale;
  ScaleRange m_dataRange;
  Mode m_mode = Chi;
  bool m_showingPartner = false;
  ChiStats m_stats;
};

} // namespace spex
