// SweepView: a patch-size sweep (core/sweep) as two heatmaps over nwavestep (columns)
// x nsubbundles (rows) for one engine and wavepad: throughput (bins per second,
// brighter is faster) and accuracy (the sweep's score: |pull mean| + |pull std - 1|
// against truth, or the max pull against a reference run; brighter is better). The
// best setting of the engine (SweepResult::bestSettings) is outlined and starred; the
// setting the Parameters use now (the applied one) has a white-and-black frame and an
// "applied" tag. Each map has a colour bar (HeatmapLegend, on its own panel) with its
// value range; a map of one value shows one swatch with that value.
// Clicking a cell emits the sweep row behind it.
#pragma once

#include "../heatmap_legend.h"

#include "core/sweep/sweep.h"

#include <QWidget>

class QComboBox;
class QLabel;

namespace spex {

// One heatmap of the grid; values NaN where a setting failed or is missing.
class SweepHeatmap : public QWidget {
  Q_OBJECT
public:
  explicit SweepHeatmap(QWidget* parent = nullptr);

  // values[i * xs.size() + j] for ys[i] (rows, bottom to top) x xs[j] (columns);
  // rows[...] the sweep row behind each cell (-1 none); best: cell index or -1.
  void setData(const QString& title, const QVector<int>& xs, const QVector<int>& ys,
               const QVector<double>& values, const QVector<int>& rows, int best, bool higherIsBetter,
               const QString& format);
  int columns() const { return int(m_xs.size()); }
  int rowsCount() const { return int(m_ys.size()); }
  double value(int i, int j) const;
  int sweepRow(int i, int j) const;
  int bestCell() const { return m_best; }
  // The cell of the applied setting, -1 when it is not on this map.
  void setAppliedCell(int cell);
  void setLegendLabel(const QString& label) { m_legendLabel = label; update(); }
  int appliedCell() const { return m_applied; }
  HeatmapLegend legend() const;
  QRect legendRect() const { return m_legendRect; } // where the last paint put it
  QRect cellRect(int i, int j) const;
  QColor cellColor(int i, int j) const;
  QString title() const { return m_title; }

  QSize sizeHint() const override { return {320, 300}; }

signals:
  void cellClicked(int sweepRow);

protected:
  void paintEvent(QPaintEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;

private:
  QRect gridRect() const;

  QString m_title, m_format;
  QVector<int> m_xs, m_ys, m_rows;
  QVector<double> m_values;
  int m_best = -1, m_applied = -1;
  QRect m_legendRect;
  QString m_legendLabel;
  bool m_higherIsBetter = true;
  double m_lo = 0, m_hi = 1;
};

class SweepView : public QWidget {
  Q_OBJECT
public:
  explicit SweepView(QWidget* parent = nullptr);

  void setResult(SweepResult result, double tolerance = -1); // < 0: 0.02 truth, 0.1 reference
  const SweepResult& result() const { return m_result; }
  QStringList engines() const;
  void setEngine(const QString& engine);
  QString engine() const;

  SweepHeatmap* throughputMap() const { return m_throughput; }
  SweepHeatmap* accuracyMap() const { return m_accuracy; }
  QString bestText() const;
  // Marks the setting the Parameters use now on both maps (none when it was not swept).
  void setApplied(int nwavestep, int nsubbundles, double wavepadFrac);
  void clearApplied() { setApplied(0, 0, 0); }

signals:
  void rowActivated(int sweepRow);

private:
  void rebuild();

  SweepResult m_result;
  double m_tolerance = 0.02;
  QComboBox* m_engine;
  QComboBox* m_wavepad;
  QLabel* m_best;
  SweepHeatmap* m_throughput;
  SweepHeatmap* m_accuracy;
  int m_appliedNw = 0, m_appliedNs = 0;
  double m_appliedPad = 0;
};

} // namespace spex
