// SideBySideView: data | model | chi next to each other (issue 14), each an
// ImageCanvas on the shared ViewState, so pan and zoom are the same in all three (and
// in the CCD view); the cursor over any of them draws a crosshair at the same CCD
// pixel in all three, and the line above gives that pixel's three values.
#pragma once

#include "image_canvas.h"
#include "image_scale.h"

#include "core/array.h"
#include "core/image.h"

#include <QFutureWatcher>
#include <QPointer>
#include <QWidget>

#include <array>
#include <memory>

class QLabel;

namespace spex {

class SideBySideView : public QWidget {
  Q_OBJECT
public:
  explicit SideBySideView(ViewState* state, QWidget* parent = nullptr);

  // chi: (data - model) sqrt(ivar), as the residual view computed it; null with the
  // model. Pictures are rendered on a worker thread, and only while the view is shown
  // (a hidden view renders when it is shown); updated() says they are in.
  // The model is edited in place by later runs (revision: the Document's
  // modelRevision), so the view keeps a snapshot of it taken here, when the caller's
  // array is at rest: renders and the values line read the snapshot, whatever happens
  // to the caller's array afterwards. chi needs none: the residual view copies a chi
  // array that others hold before changing it (copy-on-write), and the image is
  // never changed in place.
  void setInputs(std::shared_ptr<const Image> image, std::shared_ptr<const Array2D<double>> model,
                 std::shared_ptr<const Array2D<double>> chi, const ScaleSettings& dataScale,
                 quint64 revision = 0);
  // The model snapshot the pictures are made from (null without a model).
  std::shared_ptr<const Array2D<double>> modelSnapshot() const { return m_model; }
  bool isUpdating() const { return m_watcher.isRunning() || m_dirty; }
  void waitForUpdate();

  ImageCanvas* canvas(int i) const { return m_canvas[i]; } // 0 data, 1 model, 2 chi
  // The values line for a CCD point ("x 12  y 40  data …  model …  χ …").
  QString valuesAt(QPointF ccd) const;
  QString readout() const;
  // What hovering does: the crosshair on that pixel in all three and its values.
  void showPixel(QPointF ccd) { onHover(ccd); }

signals:
  void updated();

protected:
  void showEvent(QShowEvent* e) override;

private:
  struct Job {
    std::shared_ptr<const Image> image;
    std::shared_ptr<const Array2D<double>> model, chi;
    ScaleSettings scale;
    std::array<ImageCanvas::Pyramid, 3> pictures;
    std::array<ScaleRange, 3> ranges;
    std::array<QVector<QRgb>, 3> tables;
  };
  void start();
  void onFinished();
  void onHover(QPointF ccd);
  void onLeave();

  QPointer<ViewState> m_state;
  std::array<ImageCanvas*, 3> m_canvas{};
  QLabel* m_values = nullptr;
  std::shared_ptr<const Image> m_image;
  std::shared_ptr<const Array2D<double>> m_model, m_chi; // m_model: the view's own snapshot
  const Array2D<double>* m_modelSource = nullptr;        // the caller's array it was taken from
  ScaleSettings m_scale;
  quint64 m_revision = 0;
  QFutureWatcher<Job> m_watcher;
  bool m_dirty = false;
};

} // namespace spex
