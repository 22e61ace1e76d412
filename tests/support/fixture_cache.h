#ifndef LLMC_TESTS_SUPPORT_FIXTURE_CACHE_H_
#define LLMC_TESTS_SUPPORT_FIXTURE_CACHE_H_

#include <functional>
#include <string>
#include <vector>

namespace llmc::testing {

// The folders tests make with Python (exported packages, parity fixtures, checkpoints) take seconds each, and
// ctest runs every test case in a process of its own, so a folder made "once per process" was made again by
// each of the dozens of cases that use it, in each of CI's three runs of the suite.
//
// CachedFolder returns the folder `make(folder)` fills for `command`, the arguments that decide its contents in
// full. It is made once per build folder and shared by the test processes that ask for it, running or to come;
// a process that asks while another makes it waits for that one. It is made again when any Python source of
// the exporter or of tests/python changes, or when a file named in `command` does (size or time). `make` gets
// an empty folder and throws on failure, which keeps nothing. What comes back is shared: copy it before changing
// anything in it. LLMC_TEST_FIXTURE_CACHE=off gives every call a fresh folder, as before.
std::string CachedFolder(const std::string& label, const std::vector<std::string>& command,
                         const std::function<void(const std::string& folder)>& make);

// What most `make`s do: runs `script_and_args` with the tests' Python (python3-torch) and `--out out`, at most
// 240 s, and throws with the script's output, headed by `what`, when it fails.
void RunPythonInto(const std::vector<std::string>& script_and_args, const std::string& out, const std::string& what);

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_FIXTURE_CACHE_H_
