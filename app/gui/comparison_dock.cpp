#include "comparison_dock.h"

#include "document.h"

#include "core/bary/barycentric.h"
#include "core/io/frame_io.h"
#include "widgets/comparison/frame_comparison_view.h"
#include "widgets/view_state.h"

#include <QComboBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QStandardItemModel>
#include <QVBoxLayout>

namespace spex {

namespace {
const QString kCurrent = QStringLiteral("%1: what the views show now");
const QString kOpenedFrame = QStringLiteral("opened frame (File \u2192 Open frame)");
} // namespace

ComparisonDock::ComparisonDock(Document* doc, ViewState* state, bool cudaUsable, const QString& cudaWhy,
                               QWidget* parent)
    : QDockWidget(tr("Compare results"), parent), m_doc(doc), m_state(state), m_cudaUsable(cudaUsable),
      m_cudaWhy(cudaWhy) {
  setObjectName(QStringLiteral("resultComparisonDock"));
  auto* w = new QWidget;
  m_boxA = new QComboBox;
  m_boxB = new QComboBox;
  m_boxA->setObjectName(QStringLiteral("compareA"));
  m_boxB->setObjectName(QStringLiteral("compareB"));
  for (QComboBox* b : {m_boxA, m_boxB}) {
    b->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    b->setMinimumContentsLength(18);
  }
  m_compare = new QPushButton(tr("Compare"));
  m_compare->setToolTip(tr("(a \u2212 b)/\u03c3 per bin, the |\u0394|/\u03c3 map and the agreement table"));
  m_openFile = new QPushButton(tr("Open frame file\u2026"));
  m_openFile->setToolTip(tr("A frame FITS file (e.g. the pipeline's frame-*.fits) to compare with"));
  auto* bar = new QHBoxLayout;
  bar->addWidget(new QLabel(tr("a:")));
  bar->addWidget(m_boxA, 1);
  bar->addWidget(new QLabel(tr("b:")));
  bar->addWidget(m_boxB, 1);
  bar->addWidget(m_compare);
  bar->addWidget(m_openFile);

  m_cudaNote = new QLabel;
  m_cudaNote->setObjectName(QStringLiteral("compareCudaNote"));
  m_cudaNote->setWordWrap(true);
  m_cudaNote->setStyleSheet(QStringLiteral("color: #555;"));
  m_cudaNote->setText(
      cudaUsable ? tr("Runs of either engine appear here as they finish: extract (with the CPU, CUDA or both) or "
                      "run CPU vs CUDA, change a parameter and extract again, or open a frame.")
                 : tr("No CUDA here (%1), so there are no CUDA runs to choose. Compare a CPU run with an opened frame "
                      "(File \u2192 Open frame, or Open frame file\u2026), or two CPU runs: change a parameter in "
                      "Parameters and extract again.")
                       .arg(cudaWhy));

  m_view = new FrameComparisonView(state);
  m_view->setPsf(doc->psf());
  auto* lay = new QVBoxLayout(w);
  lay->setContentsMargins(2, 2, 2, 2);
  lay->addLayout(bar);
  lay->addWidget(m_cudaNote);
  lay->addWidget(m_view, 1);
  setWidget(w);

  connect(m_compare, &QPushButton::clicked, this, [this] { compare(); });
  connect(m_openFile, &QPushButton::clicked, this, [this] {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open a frame to compare"), {},
                                                      tr("Frames (*.fits *.fits.gz *.fit);;All files (*)"));
    if (!path.isEmpty()) openFrameFile(path);
  });
  connect(doc, &Document::resultsChanged, this, &ComparisonDock::rebuildChoices);
  connect(doc, &Document::inputsChanged, this, [this] {
    m_view->setPsf(m_doc->psf());
    m_view->showMessage(tr("New inputs are open: choose two results and press Compare."));
    rebuildChoices();
  });
  rebuildChoices();
}

void ComparisonDock::setRuns(const std::vector<Run>& runs) {
  m_runs.clear();
  // Only runs that kept their arrays can be compared (a run summary without FLUX,
  // e.g. an opened trace's, cannot).
  for (const Run& r : runs)
    if (r.result && !r.result->flux.empty() && !r.result->ivar.empty()) m_runs.push_back(r);
  rebuildChoices();
}

bool ComparisonDock::openFrameFile(const QString& path) {
  std::shared_ptr<ExtractionResult> r;
  try {
    r = std::make_shared<ExtractionResult>(readFrame(path.toStdString()));
    // As File > Open frame: a barycentric-corrected frame's spectra were extracted at
    // grid / HELIOCOR, which is the grid a run that lines up with it has.
    if (r->heliocor != 1.0) r->wave = barycentricExtractionGrid(r->wave, r->heliocor);
  } catch (const std::exception& e) {
    m_view->showMessage(tr("Could not read the frame %1: %2").arg(path, QString::fromStdString(e.what())));
    return false;
  }
  const QString label = tr("file %1").arg(QFileInfo(path).fileName());
  std::erase_if(m_files, [&](const Choice& c) { return c.label == label; });
  m_files.push_back({label, r});
  rebuildChoices();
  m_boxB->setCurrentIndex(m_boxB->findText(label));
  return true;
}

void ComparisonDock::rebuildChoices() {
  std::vector<Choice> choices;
  for (auto it = m_runs.rbegin(); it != m_runs.rend(); ++it) choices.push_back({it->label, it->result});
  for (const SpectrumSource& s : m_doc->sources()) {
    if (!s.result || s.result->flux.empty()) continue; // a run's placeholder
    choices.push_back({s.name == "frame" ? kOpenedFrame : kCurrent.arg(QString::fromStdString(s.name)), s.result});
  }
  for (const Choice& f : m_files) choices.push_back(f);
  if (!m_cudaUsable) choices.push_back({tr("cuda: not available here (%1)").arg(m_cudaWhy), nullptr});

  // Unchanged labels: keep the boxes (and the user's choice) as they are.
  bool same = choices.size() == m_choices.size();
  for (std::size_t i = 0; same && i < choices.size(); ++i) same = choices[i].label == m_choices[i].label;
  m_choices = std::move(choices);
  if (same) return;
  const QString a = choiceA(), b = choiceB();
  for (QComboBox* box : {m_boxA, m_boxB}) {
    const QSignalBlocker block(box);
    box->clear();
    for (const Choice& c : m_choices) {
      box->addItem(c.label);
      if (!c.result) {
        auto* model = qobject_cast<QStandardItemModel*>(box->model());
        if (QStandardItem* item = model ? model->item(box->count() - 1) : nullptr) {
          item->setEnabled(false);
          item->setToolTip(m_cudaNote->text());
        }
      }
    }
  }
  // Keep what was chosen; else a = the newest run, b = the opened frame (production)
  // or the run before.
  int ia = m_boxA->findText(a), ib = m_boxB->findText(b);
  const int usable = int(std::count_if(m_choices.begin(), m_choices.end(), [](const Choice& c) { return c.result; }));
  if (ia < 0) ia = usable > 0 ? 0 : -1;
  if (ib < 0 || ib == ia) {
    ib = m_boxB->findText(kOpenedFrame);
    if (ib < 0 || ib == ia) ib = usable > 1 ? (ia == 0 ? 1 : 0) : -1;
  }
  m_boxA->setCurrentIndex(ia);
  m_boxB->setCurrentIndex(ib);
  m_compare->setEnabled(usable > 0);
}

QStringList ComparisonDock::choices() const {
  QStringList out;
  for (const Choice& c : m_choices) out << c.label;
  return out;
}

bool ComparisonDock::choose(const QString& a, const QString& b) {
  const int ia = m_boxA->findText(a), ib = m_boxB->findText(b);
  if (ia < 0 || ib < 0) return false;
  m_boxA->setCurrentIndex(ia);
  m_boxB->setCurrentIndex(ib);
  return true;
}

QString ComparisonDock::choiceFor(const QString& key) {
  if (key == QLatin1String("last") || key == QLatin1String("previous")) {
    const std::size_t back = key == QLatin1String("last") ? 1 : 2;
    return m_runs.size() >= back ? m_runs[m_runs.size() - back].label : QString();
  }
  QString label;
  if (key == QLatin1String("frame")) label = kOpenedFrame;
  else if (key == QLatin1String("cpu") || key == QLatin1String("cuda")) label = kCurrent.arg(key);
  else if (openFrameFile(key)) label = tr("file %1").arg(QFileInfo(key).fileName());
  return resultOf(label) ? label : QString();
}

QString ComparisonDock::choiceA() const { return m_boxA->currentText(); }
QString ComparisonDock::choiceB() const { return m_boxB->currentText(); }

std::shared_ptr<const ExtractionResult> ComparisonDock::resultOf(const QString& label) const {
  for (const Choice& c : m_choices)
    if (c.label == label) return c.result;
  return nullptr;
}

bool ComparisonDock::compare() {
  const auto a = resultOf(choiceA()), b = resultOf(choiceB());
  if (!a || !b) {
    m_view->showMessage(m_choices.empty()
                            ? tr("Nothing to compare yet: extract (Run toolbar), open a frame, or open a frame file.")
                            : tr("Choose two results, a and b."));
    return false;
  }
  return m_view->compare(choiceA(), *a, choiceB(), *b);
}

} // namespace spex
