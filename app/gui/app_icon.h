// The application icon: resources/spexlab.svg, compiled into the program. Qt draws
// SVG icons through its SVG icon-engine and image plugins (Debian: libqt6svg6, in
// .ci/packages.txt); svgIconRenders() says whether they are there.
#pragma once

#include <QIcon>

namespace spex {

QIcon applicationIcon();
bool svgIconRenders(); // the SVG renders to a non-empty picture

} // namespace spex
