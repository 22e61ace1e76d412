#ifndef LLMC_TOOLS_BENCH_PROGRESS_BAR_H_
#define LLMC_TOOLS_BENCH_PROGRESS_BAR_H_

#include <cstdio>
#include <string>

#include "tools/bench/load_runner.h"

namespace llmc::bench {

// The progress line of a run on a terminal ("\r" redrawn), or on anything else one line per 10% of the
// requests, so logs stay short.
class ProgressBar {
 public:
  explicit ProgressBar(std::FILE* out);

  void Update(const RunProgress& progress);
  // Ends the line (once), after the last update.
  void Finish();

  // The text of one update, e.g. "[########----------]  40/100 ok 39 failed 1 running 8  12.3 s  512 tok/s".
  static std::string Render(const RunProgress& progress, int width = 30);

 private:
  std::FILE* out_;
  bool terminal_;
  int last_decile_ = -1;
  bool drawn_ = false;
};

}  // namespace llmc::bench

#endif  // LLMC_TOOLS_BENCH_PROGRESS_BAR_H_
