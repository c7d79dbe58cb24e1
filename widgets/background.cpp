#include "background.h"

#include <QThreadPool>

namespace spex {

QThreadPool* backgroundPool() {
  static QThreadPool* pool = [] {
    auto* p = new QThreadPool; // lives as long as the process: jobs may outlive windows
    p->setMaxThreadCount(8);  // few, mostly long tasks; each engine has its own threads
    return p;
  }();
  return pool;
}

} // namespace spex
