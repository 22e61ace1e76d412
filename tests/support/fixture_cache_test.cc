#include "tests/support/fixture_cache.h"

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/catch.h"
#include "tests/support/child_process.h"

namespace llmc::testing {
namespace {

namespace fs = std::filesystem;

// A command no earlier run has asked for, so that each run of these tests makes its folders afresh.
std::vector<std::string> FreshCommand(const std::string& what) {
  std::random_device random;
  return {what, std::to_string(random()) + "-" + std::to_string(random())};
}

// Makes a folder holding one file, counting the calls.
std::function<void(const std::string&)> CountingMaker(std::atomic<int>& calls) {
  return [&calls](const std::string& folder) {
    ++calls;
    std::ofstream(folder + "/made.txt") << "made";
  };
}

void RemoveCached(const std::string& folder) {
  std::error_code ignored;
  fs::remove_all(folder, ignored);
  fs::remove(folder + ".lock", ignored);
}

TEST_CASE("fixture cache: a folder is made once and found again, another command makes another", "[unit]") {
  std::atomic<int> calls{0};
  const std::vector<std::string> command = FreshCommand("same");
  const std::string first = CachedFolder("unit-test", command, CountingMaker(calls));
  const std::string again = CachedFolder("unit-test", command, CountingMaker(calls));
  CHECK(first == again);
  CHECK(calls == 1);
  CHECK(fs::exists(first + "/made.txt"));
  const std::string other = CachedFolder("unit-test", FreshCommand("other"), CountingMaker(calls));
  CHECK(other != first);
  CHECK(calls == 2);
  RemoveCached(first);
  RemoveCached(other);
}

TEST_CASE("fixture cache: a file named in the command that changes makes the folder again", "[unit]") {
  const std::string input = MakeTempDir("llmc-fixture-input") + "/input.txt";
  std::ofstream(input) << "one";
  std::vector<std::string> command = FreshCommand("with a file");
  command.push_back(input);
  std::atomic<int> calls{0};
  const std::string before = CachedFolder("unit-test", command, CountingMaker(calls));
  std::ofstream(input) << "one and more";
  const std::string after = CachedFolder("unit-test", command, CountingMaker(calls));
  CHECK(after != before);
  CHECK(calls == 2);
  RemoveCached(before);
  RemoveCached(after);
}

TEST_CASE("fixture cache: a failed make keeps nothing and the next caller makes it", "[unit]") {
  const std::vector<std::string> command = FreshCommand("failing");
  std::string attempted;
  CHECK_THROWS_WITH(CachedFolder("unit-test", command,
                                 [&](const std::string& folder) {
                                   attempted = folder;
                                   std::ofstream(folder + "/half.txt") << "half";
                                   throw std::runtime_error("the script failed");
                                 }),
                    "the script failed");
  CHECK_FALSE(fs::exists(attempted));
  std::atomic<int> calls{0};
  const std::string made = CachedFolder("unit-test", command, CountingMaker(calls));
  CHECK(calls == 1);
  CHECK(fs::exists(made + "/made.txt"));
  CHECK_FALSE(fs::exists(made + "/half.txt"));
  RemoveCached(made);
}

TEST_CASE("fixture cache: callers that ask at once wait for the one making it", "[unit]") {
  const std::vector<std::string> command = FreshCommand("at once");
  std::atomic<int> calls{0};
  const auto slow_maker = [&](const std::string& folder) {
    ++calls;
    absl::SleepFor(absl::Milliseconds(200));
    std::ofstream(folder + "/made.txt") << "made";
  };
  std::vector<std::string> folders(4);
  std::vector<std::thread> callers;
  for (size_t i = 0; i < folders.size(); ++i) {
    callers.emplace_back([&, i] { folders[i] = CachedFolder("unit-test", command, slow_maker); });
  }
  for (std::thread& caller : callers) caller.join();
  CHECK(calls == 1);
  for (const std::string& folder : folders) {
    CHECK(folder == folders[0]);
    CHECK(fs::exists(folder + "/made.txt"));
  }
  RemoveCached(folders[0]);
}

TEST_CASE("fixture cache: LLMC_TEST_FIXTURE_CACHE=off makes a fresh folder every time", "[unit]") {
  setenv("LLMC_TEST_FIXTURE_CACHE", "off", 1);
  std::atomic<int> calls{0};
  const std::vector<std::string> command = FreshCommand("off");
  const std::string first = CachedFolder("unit-test", command, CountingMaker(calls));
  const std::string second = CachedFolder("unit-test", command, CountingMaker(calls));
  unsetenv("LLMC_TEST_FIXTURE_CACHE");
  CHECK(first != second);
  CHECK(calls == 2);
}

TEST_CASE("RemoveTree removes a nested tree, leaves what its links point to, and accepts a missing path", "[unit]") {
  const fs::path root = MakeTempDir("llmc-remove-tree");
  const fs::path outside = MakeTempDir("llmc-remove-tree-outside");
  std::ofstream(outside / "kept.txt") << "kept";
  fs::create_directories(root / "a" / "b" / "c");
  std::ofstream(root / "top.txt") << "x";
  std::ofstream(root / "a" / "b" / "c" / "deep.txt") << "y";
  fs::create_directory_symlink(outside, root / "a" / "link-to-outside");
  CHECK(RemoveTree(root.string()));
  CHECK_FALSE(fs::exists(fs::symlink_status(root)));
  CHECK(fs::exists(outside / "kept.txt"));
  CHECK(RemoveTree(root.string()));  // gone already
  CHECK(RemoveTree(outside.string()));
  CHECK_FALSE(fs::exists(outside));
}

}  // namespace
}  // namespace llmc::testing
