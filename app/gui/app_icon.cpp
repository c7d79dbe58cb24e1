#include "app_icon.h"

#include <QImage>
#include <QImageReader>
#include <QPixmap>

// Resources of a static library must be registered by name (outside any namespace).
static void initSpexlabResources() { Q_INIT_RESOURCE(spexlab); }

namespace spex {

namespace {
const QString kIconPath = QStringLiteral(":/spexlab/spexlab.svg");
}

QIcon applicationIcon() {
  initSpexlabResources();
  return QIcon(kIconPath);
}

bool svgIconRenders() {
  initSpexlabResources();
  QImageReader reader(kIconPath);
  reader.setScaledSize(QSize(64, 64));
  const QImage img = reader.read();
  if (img.isNull()) return false;
  for (int y = 0; y < img.height(); ++y)
    for (int x = 0; x < img.width(); ++x)
      if (qAlpha(img.pixel(x, y)) > 0) return true;
  return false;
}

} // namespace spex
