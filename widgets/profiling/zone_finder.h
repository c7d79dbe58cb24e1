// ZoneFinder: Tracy's "find zone" for one run. Type or pick a zone name; the view
// lists every zone of that name, slowest first (duration, self time, start, lane,
// patch), with their statistics (count, total, mean, median, min, max) and a histogram
// of their durations on a log axis. Clicking a histogram bar keeps only the zones of
// that bar (again: all); clicking a zone emits zoneActivated (the dock shows it on the
// timeline) and, when it belongs to a patch, patchActivated (the dock selects the
// patch on the CCD).
#pragma once

#include "core/profile/profile.h"

#include <QWidget>

#include <memory>
#include <vector>

class QComboBox;
class QLabel;
class QTableWidget;

namespace spex {

// Durations of zones as a histogram on a log10 axis between the shortest and the
// longest (one bin when they are equal).
class DurationHistogram : public QWidget {
  Q_OBJECT
public:
  explicit DurationHistogram(QWidget* parent = nullptr);

  static constexpr int kBins = 40;
  void setDurations(std::vector<int64_t> ns);
  int binCount() const { return int(m_counts.size()); }
  int binOf(int64_t ns) const;       // -1 outside
  int count(int bin) const { return bin >= 0 && bin < binCount() ? m_counts[bin] : 0; }
  int64_t binLow(int bin) const;     // ns, inclusive
  int64_t binHigh(int bin) const;    // ns, inclusive for the last bin
  QRect barRect(int bin) const;      // the bin's column (full height)
  int selectedBin() const { return m_selected; }
  void setSelectedBin(int bin);      // -1: none

  QSize sizeHint() const override { return {360, 130}; }
  QSize minimumSizeHint() const override { return {160, 90}; }

signals:
  void binClicked(int bin); // -1: the selection was cleared

protected:
  void paintEvent(QPaintEvent*) override;
  void mouseReleaseEvent(QMouseEvent*) override;

private:
  QRect plotRect() const;
  std::vector<int> m_counts;
  double m_logLo = 0, m_logHi = 0; // log10 ns
  int64_t m_min = 0, m_max = 0;
  double m_mean = 0, m_median = 0;
  int m_selected = -1;
};

class ZoneFinder : public QWidget {
  Q_OBJECT
public:
  explicit ZoneFinder(QWidget* parent = nullptr);

  void setProfile(std::shared_ptr<const Profile> profile);
  // Shows the zones named `name` (exactly; else every name containing it, any case).
  void find(const QString& name);
  QString query() const;

  // The zones listed, slowest first (indices into the profile's ranges).
  const std::vector<int>& matches() const { return m_shown; }
  const std::vector<int>& allMatches() const { return m_matches; }
  QComboBox* nameBox() const { return m_name; }
  QTableWidget* table() const { return m_table; }
  DurationHistogram* histogram() const { return m_hist; }
  QString statsText() const;

signals:
  void zoneActivated(int rangeIndex);
  void patchActivated(int patch);

private:
  void fill();

  std::shared_ptr<const Profile> m_profile;
  std::vector<int64_t> m_self;
  std::vector<int> m_matches, m_shown;
  QComboBox* m_name;
  QLabel* m_stats;
  DurationHistogram* m_hist;
  QTableWidget* m_table;
};

} // namespace spex
