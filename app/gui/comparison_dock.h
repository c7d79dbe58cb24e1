// ComparisonDock: "Compare results", the scientist's question "how does this
// extraction differ from production (or from that other run)?". Two choices, a and b,
// each any result the workbench holds: a run of the run history (CPU or CUDA, any
// parameters), what the views show now per engine, the frame opened with File → Open
// frame, or a frame file opened here. Compare shows them in a FrameComparisonView
// (σ-difference spectra, |Δ|/σ map linked to the CCD, the agreement table of
// `spexlab-cli compare`). Where CUDA cannot run, a plain line says so and what to
// compare instead.
#pragma once

#include "core/extract/engine.h"

#include <QDockWidget>

#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QPushButton;

namespace spex {

class Document;
class FrameComparisonView;
class ViewState;

class ComparisonDock : public QDockWidget {
  Q_OBJECT
public:
  // cudaUsable/cudaWhy: whether CUDA runs can exist here, and if not, why (in words).
  ComparisonDock(Document* doc, ViewState* state, bool cudaUsable, const QString& cudaWhy, QWidget* parent = nullptr);

  struct Run {
    QString label;
    std::shared_ptr<const ExtractionResult> result;
  };
  // The run history's runs with results (newest last).
  void setRuns(const std::vector<Run>& runs);
  // Reads a frame file (FLUX, IVAR, MASK, WAVELENGTH, RESOLUTION) as a choice and
  // picks it as b; false with the reason shown when it cannot be read.
  bool openFrameFile(const QString& path);

  // Labels of the choices (the items of both boxes), and the chosen ones.
  QStringList choices() const;
  bool choose(const QString& a, const QString& b); // false when one is unknown
  // The label behind a short key: "last" (the newest run), "previous" (the run before
  // it), "frame" (the opened frame), "cpu"/"cuda" (what the views show now), or a frame
  // file's path (opened here first). Empty when there is no such result.
  QString choiceFor(const QString& key);
  QString choiceA() const;
  QString choiceB() const;
  // Compares the chosen results now; false with the reason shown in the view.
  bool compare();

  FrameComparisonView* view() const { return m_view; }
  QComboBox* boxA() const { return m_boxA; }
  QComboBox* boxB() const { return m_boxB; }
  QPushButton* compareButton() const { return m_compare; }
  QLabel* cudaNote() const { return m_cudaNote; }

private:
  struct Choice {
    QString label;
    std::shared_ptr<const ExtractionResult> result; // null: a disabled line (CUDA absent)
  };
  void rebuildChoices();
  std::shared_ptr<const ExtractionResult> resultOf(const QString& label) const;

  Document* m_doc;
  ViewState* m_state;
  bool m_cudaUsable;
  QString m_cudaWhy;
  std::vector<Run> m_runs;
  std::vector<Choice> m_files; // frame files opened here
  std::vector<Choice> m_choices;

  QComboBox* m_boxA;
  QComboBox* m_boxB;
  QPushButton* m_compare;
  QPushButton* m_openFile;
  QLabel* m_cudaNote;
  FrameComparisonView* m_view;
};

} // namespace spex
