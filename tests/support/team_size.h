#ifndef LLMC_TESTS_SUPPORT_TEAM_SIZE_H_
#define LLMC_TESTS_SUPPORT_TEAM_SIZE_H_

#include <ATen/Parallel.h>

namespace llmc::testing {

// The CPU kernels' team size (at::get_num_threads(), which the thread team follows) for one scope, restored
// after. The tests' libtorch default can be one thread, where nothing runs on a second member.
class ScopedTeamSize {
 public:
  explicit ScopedTeamSize(int size) : before_(at::get_num_threads()) { at::set_num_threads(size); }
  ~ScopedTeamSize() { at::set_num_threads(before_); }
  ScopedTeamSize(const ScopedTeamSize&) = delete;
  ScopedTeamSize& operator=(const ScopedTeamSize&) = delete;

 private:
  int before_;
};

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_TEAM_SIZE_H_
