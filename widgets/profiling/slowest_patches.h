// SlowestPatches: the patches of one run, slowest first (patchTimes of core/profile:
// the time of each patch's outermost zones), with the lane and start of its longest
// zone. Clicking a row emits patchActivated and zoneActivated, so the dock can show
// the zone on the timeline and select and centre the patch on the CCD.
#pragma once

#include "core/profile/profile.h"

#include <QWidget>

#include <memory>
#include <vector>

class QLabel;
class QTableWidget;

namespace spex {

class SlowestPatches : public QWidget {
  Q_OBJECT
public:
  explicit SlowestPatches(QWidget* parent = nullptr);

  void setProfile(std::shared_ptr<const Profile> profile);
  const std::vector<PatchTime>& patches() const { return m_patches; } // slowest first
  QTableWidget* table() const { return m_table; }
  static constexpr int kMaxRows = 200;

signals:
  void patchActivated(int patch);
  void zoneActivated(int rangeIndex);

private:
  std::shared_ptr<const Profile> m_profile;
  std::vector<PatchTime> m_patches;
  QLabel* m_summary;
  QTableWidget* m_table;
};

} // namespace spex
