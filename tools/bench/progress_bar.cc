#include "tools/bench/progress_bar.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace llmc::bench {

ProgressBar::ProgressBar(std::FILE* out) : out_(out), terminal_(isatty(fileno(out)) == 1) {}

std::string ProgressBar::Render(const RunProgress& progress, int width) {
  const int64_t done = progress.completed + progress.failed;
  const int filled = progress.total > 0 ? static_cast<int>(done * width / progress.total) : width;
  std::string bar = absl::StrCat("[", std::string(static_cast<size_t>(filled), '#'),
                                 std::string(static_cast<size_t>(width - filled), '-'), "]");
  const double rate = progress.elapsed_s > 0 ? static_cast<double>(progress.output_tokens) / progress.elapsed_s : 0;
  return absl::StrFormat("%s %*d/%d ok %d failed %d running %d  %.1f s  %.0f tok/s", bar,
                         static_cast<int>(absl::StrCat(progress.total).size()), done, progress.total,
                         progress.completed, progress.failed, progress.in_flight, progress.elapsed_s, rate);
}

void ProgressBar::Update(const RunProgress& progress) {
  if (terminal_) {
    std::fprintf(out_, "\r%s\033[K", Render(progress).c_str());
    drawn_ = true;
  } else {
    const int64_t done = progress.completed + progress.failed;
    const int decile = progress.total > 0 ? static_cast<int>(done * 10 / progress.total) : 10;
    if (decile == last_decile_) return;
    last_decile_ = decile;
    std::fprintf(out_, "%s\n", Render(progress).c_str());
  }
  std::fflush(out_);
}

void ProgressBar::Finish() {
  if (terminal_ && drawn_) std::fprintf(out_, "\n");
  drawn_ = false;
  std::fflush(out_);
}

}  // namespace llmc::bench
