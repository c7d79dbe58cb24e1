// Runs one of the project's executables the way a user or a pipeline does (a separate
// process), for the CLI suites: exit code, whether it crashed, stderr and stdout.
#pragma once

#include <QProcess>
#include <QString>
#include <QStringList>

namespace spextest {

struct Run {
  int code = -1;
  bool crashed = false;
  QString err, out;
};

// env: "NAME=value" entries set on top of this process's environment.
inline Run exec(const QString& program, const QStringList& args, const QStringList& env = {}) {
  QProcess p;
  if (!env.isEmpty()) {
    QProcessEnvironment e = QProcessEnvironment::systemEnvironment();
    for (const QString& kv : env) e.insert(kv.section('=', 0, 0), kv.section('=', 1));
    p.setProcessEnvironment(e);
  }
  p.start(program, args);
  p.waitForFinished(600000);
  Run r;
  r.crashed = p.exitStatus() != QProcess::NormalExit;
  r.code = p.exitCode();
  r.err = QString::fromUtf8(p.readAllStandardError());
  r.out = QString::fromUtf8(p.readAllStandardOutput());
  return r;
}

#ifdef SPEXLAB_CLI
inline Run cli(const QStringList& args, const QStringList& env = {}) {
  return exec(QStringLiteral(SPEXLAB_CLI), args, env);
}
#endif

} // namespace spextest
