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
#include "core/plan/patch_plan.h"

#include <QFutureWatcher>
#include <QImage>
#include <QPointer>
#include <QVector>
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

// chi = (data - model) sqrt(ivar) over the CCD with its statistics kept as sums per
// 64 x 64 block, so a model that changed inside a few boxes costs those boxes: their
// chi pixels and the blocks they touch are redone and the blocks summed again (in
// block order, so an update equals a recomputation over the whole CCD bit for bit).
struct ChiMap {
  static constexpr int kBlock = 64, kBins = 100;
  static constexpr double kLimit = 5.0; // the histogram spans +-5 sigma
  Array2D<double> chi;
  int nbx = 0, nby = 0;
  std::vector<long> n;
  std::vector<double> sum, sum2;
  std::vector<double> hist; // kBins per block
  ChiStats stats;
  QVector<double> histogram; // kBins, summed over blocks

  void compute(const Image& image, const Array2D<double>& model); // everything
  // Only inside these boxes (CCD x, y; half-open) the model changed.
  void update(const Image& image, const Array2D<double>& model, const std::vector<PixelBox>& boxes);

private:
  void blockStats(const Image& image, const Array2D<double>& model, int bx, int by);
  void total();
};

class ResidualView : public QWidget {
  Q_OBJECT
public:
  enum Mode { Data, Model, Residual, Chi };
  Q_ENUM(Mode)

  explicit ResidualView(ViewState* state, QWidget* parent = nullptr);

  // model: CCD-sized model image of an extraction (ExtractionResult::model) or null.
  // The chi image, its statistics and the full-CCD pictures are computed on a worker
  // thread (17 M pixels would stall the event loop for a second); the view updates
  // when they are ready (updated()). waitForUpdate() blocks until then.
  // `revision` names the model's state (the Document's modelRevision()): a different
  // revision recomputes everything even when the pointers are the same.
  void setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                 const QString& modelName, quint64 revision = 0);
  // The model array given to setInputs changed in place, only inside `boxes` (CCD x,
  // y), taking it from revision `from` to `to`. When the view shows `from` and is idle,
  // chi, its statistics and histogram and the pictures are updated inside the boxes on
  // the calling thread; otherwise everything is recomputed (as setInputs).
  void modelChanged(quint64 from, quint64 to, const std::vector<PixelBox>& boxes);
  void setDataScale(const ScaleSettings& s); // the CCD view's scale for data and model

  void setMode(Mode m);
  Mode mode() const { return m_mode; }
  void setBlink(bool on);
  bool blinking() const;
  void blinkStep(); // show the other image once (the timer calls it)

  bool isUpdating() const;
  void waitForUpdate();
  ChiStats chiStats() const { return m_stats; } // of the last finished update
  QVector<double> chiHistogram() const { return m_histCounts; }
  std::shared_ptr<const Array2D<double>> chiImage() const { return m_chiMap ? std::shared_ptr<const Array2D<double>>(m_chiMap, &m_chiMap->chi) : nullptr; }
  ImageCanvas* canvas() const { return m_canvas; }
  QCustomPlot* histogram() const { return m_hist; }
  bool hasModel() const { return bool(m_model); }
  // What the view shows, for views that show the same arrays another way (side by side).
  std::shared_ptr<const Image> image() const { return m_image; }
  std::shared_ptr<const Array2D<double>> model() const { return m_model; }
  std::shared_ptr<const Array2D<double>> chi() const { return chiImage(); } // of the last update
  ScaleSettings dataScale() const { return m_dataScale; }
  QString modelName() const { return m_modelName; }
  // The name of the picture on screen now (follows the blink): "data", "model", ...
  QString shownName() const;

signals:
  void readoutChanged(const QString& text);
  void updated();

protected:
  void resizeEvent(QResizeEvent* e) override;

private:
  // The colour bar of a rendered picture.
  struct Bar {
    QVector<QRgb> table;
    ScaleRange range;
    Stretch stretch = Stretch::Linear;
    QString unit;
  };
  // What a worker computes from a snapshot of the inputs; arrays already computed for
  // the same inputs are passed in and reused.
  struct Job {
    std::shared_ptr<const Image> image;
    std::shared_ptr<const Array2D<double>> model, resid;
    std::shared_ptr<ChiMap> chi;
    quint64 revision = 0;
    ChiStats stats;
    QVector<double> hist; // chi histogram counts
    ScaleSettings dataScale;
    ScaleRange dataRange;
    bool haveRange = false;
    Mode mode = Chi, partnerMode = Data;
    ImageCanvas::Pyramid shown, partner;
    bool shownIsData = false; // no model: the data stands in
    double contrast = 1.0, bias = 0.5; // the canvas' right-drag, for data - model and chi
    Bar shownBar, partnerBar;
  };
  static void compute(Job& job);
  static QImage render(const Job& job, Mode m, Bar* bar = nullptr);
  void showBarOf(bool partner);

  void rebuild(); // starts (or queues) a background update of the current state
  void startJob();
  void onJobFinished();
  void install(Job&& job);
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
  quint64 m_revision = 0;
  std::shared_ptr<const Array2D<double>> m_resid; // computed on demand, dropped with the inputs
  std::shared_ptr<ChiMap> m_chiMap; // only the GUI thread writes it, never while a job runs
  QVector<double> m_histCounts;
  ScaleSettings m_dataScale;
  ScaleRange m_dataRange;
  bool m_haveRange = false; // m_dataRange is for m_image and m_dataScale
  QFutureWatcher<Job> m_watcher;
  bool m_jobConsumed = true;
  bool m_rebuildQueued = false; // inputs changed while a job ran
  Mode m_mode = Chi;
  bool m_showingPartner = false;
  ChiStats m_stats;
  Bar m_shownBar, m_partnerBar;
  bool m_shownIsData = false;
};

} // namespace spex
