// User words for error texts from the core: dialogs say what went wrong in plain
// language and keep the raw text (CFITSIO status codes, command-line flags) for a
// "Show Details" box, where a bug report can copy it from.
#pragma once

#include <QString>

namespace spex {

struct UserMessage {
  QString text;    // what the dialog says
  QString details; // the raw text when it differs (empty otherwise)
};

UserMessage userMessage(const QString& raw);

} // namespace spex
