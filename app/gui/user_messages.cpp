#include "user_messages.h"

#include <QRegularExpression>

namespace spex {

UserMessage userMessage(const QString& raw) {
  QString t = raw;
  // CFITSIO's status and stack are for the details; the sentence before them says
  // which file and what failed.
  const int fits = t.indexOf(QLatin1String("CFITSIO status"));
  if (fits >= 0) {
    t = t.left(fits).trimmed();
    if (t.endsWith(QLatin1Char(':'))) t.chop(1);
    t.replace(QLatin1String("cannot open as FITS"),
              QLatin1String("cannot be read as a FITS file (it is not one, or it is damaged or cut short)"));
    t.replace(QLatin1String("cannot reach HDU"), QLatin1String("the file ends before this part of it"));
    if (t.isEmpty()) t = QStringLiteral("The FITS library could not read or write the file.");
  }
  // Command-line flags mean nothing in the workbench: name the choice instead.
  static const QRegularExpression engineFlag(QStringLiteral("--engine[ =](cuda|cpu|auto|both)"));
  for (auto it = engineFlag.globalMatch(t); it.hasNext();) {
    const auto m = it.next();
    const QString e = m.captured(1);
    const QString words = e == QLatin1String("cuda")   ? QStringLiteral("The CUDA engine")
                          : e == QLatin1String("cpu")  ? QStringLiteral("The CPU engine")
                          : e == QLatin1String("auto") ? QStringLiteral("The Auto engine")
                                                       : QStringLiteral("CPU and CUDA");
    t.replace(m.captured(0), words);
  }
  t.replace(QStringLiteral("--gpus"), QStringLiteral("the GPU list"));
  t.replace(QStringLiteral("no usable GPU: none"), QStringLiteral("no usable GPU on this computer"));
  t.replace(QStringLiteral("The CUDA engine: no usable GPU"), QStringLiteral("The CUDA engine cannot run: no usable GPU"));
  if (!t.isEmpty()) t[0] = t[0].toUpper();
  UserMessage m;
  m.text = t;
  if (t != raw) m.details = raw;
  return m;
}

} // namespace spex
