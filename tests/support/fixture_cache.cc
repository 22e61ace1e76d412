#include "tests/support/fixture_cache.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tests/support/child_process.h"

namespace llmc::testing {
namespace {

namespace fs = std::filesystem;

// Written into a folder once `make` has filled it: a folder without it was left by a maker that died.
constexpr char kCompleteMarker[] = ".complete";
// The slowest fixture takes about a minute to make under the sanitizers; a longer wait means its maker is stuck.
constexpr absl::Duration kLockWait = absl::Minutes(10);
// Folders made from other versions of the scripts are removed once nobody has added to them for this long.
constexpr auto kStaleAfter = std::chrono::hours(6);

class Fnv1a {
 public:
  void Add(std::string_view field) {
    for (const unsigned char byte : field) Mix(byte);
    Mix(0);  // so that ("ab", "c") and ("a", "bc") differ
  }
  uint64_t value() const { return hash_; }

 private:
  void Mix(unsigned char byte) {
    hash_ ^= byte;
    hash_ *= 0x100000001b3ULL;
  }
  uint64_t hash_ = 0xcbf29ce484222325ULL;
};

// Every file of the exporter and of the tests' Python scripts (and the references they import).
uint64_t ScriptsFingerprint() {
  static const uint64_t fingerprint = [] {
    const fs::path root(LLMC_SOURCE_DIR);
    std::vector<fs::path> sources = {root / "tools" / "export_model.py"};
    for (const fs::path& dir : {root / "tools" / "llmc_export", root / "tests" / "python"}) {
      for (const auto& entry : fs::recursive_directory_iterator(dir)) {
        if (entry.is_regular_file() && entry.path().string().find("__pycache__") == std::string::npos) {
          sources.push_back(entry.path());
        }
      }
    }
    std::sort(sources.begin(), sources.end());
    Fnv1a hash;
    for (const fs::path& source : sources) {
      std::ifstream in(source, std::ios::binary);
      hash.Add(source.string());
      hash.Add(std::string(std::istreambuf_iterator<char>(in), {}));
    }
    return hash.value();
  }();
  return fingerprint;
}

// The command's arguments, and the size and time of each one that names a file (a tokenizer, a checkpoint).
uint64_t CommandKey(const std::vector<std::string>& command) {
  Fnv1a hash;
  for (const std::string& argument : command) {
    hash.Add(argument);
    std::error_code error;
    if (fs::is_regular_file(argument, error)) {
      hash.Add(std::to_string(fs::file_size(argument, error)));
      hash.Add(std::to_string(fs::last_write_time(argument, error).time_since_epoch().count()));
    }
  }
  return hash.value();
}

// The folder for this version of the scripts; the first call in a process clears out stale versions.
fs::path VersionRoot() {
  static const fs::path root = [] {
    const fs::path base(LLMC_TEST_FIXTURE_DIR);
    const fs::path version = base / absl::StrFormat("%016x", ScriptsFingerprint());
    fs::create_directories(version);
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(base, error)) {
      if (entry.path() == version || !entry.is_directory(error)) continue;
      if (fs::file_time_type::clock::now() - entry.last_write_time(error) > kStaleAfter) {
        RemoveTree(entry.path().string());
      }
    }
    return version;
  }();
  return root;
}

// Held by the one process making a folder; the others wait here for it.
class FolderLock {
 public:
  explicit FolderLock(const std::string& path) : fd_(open(path.c_str(), O_CREAT | O_RDWR | O_CLOEXEC, 0644)) {
    if (fd_ < 0) throw std::runtime_error("cannot open the lock file " + path);
    const absl::Time deadline = absl::Now() + kLockWait;
    while (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      if (absl::Now() >= deadline) {
        close(fd_);
        throw std::runtime_error("waited " + absl::FormatDuration(kLockWait) + " for another test process to make " +
                                 path);
      }
      absl::SleepFor(absl::Milliseconds(50));
    }
  }
  ~FolderLock() { close(fd_); }  // releases the lock
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

 private:
  int fd_;
};

}  // namespace

std::string CachedFolder(const std::string& label, const std::vector<std::string>& command,
                         const std::function<void(const std::string& folder)>& make) {
  const char* setting = std::getenv("LLMC_TEST_FIXTURE_CACHE");
  if (setting != nullptr && std::string_view(setting) == "off") {
    const std::string folder = MakeTempDir("llmc-" + label);
    make(folder);
    return folder;
  }
  const fs::path folder = VersionRoot() / absl::StrFormat("%s-%016x", label, CommandKey(command));
  if (fs::exists(folder / kCompleteMarker)) return folder.string();
  FolderLock lock(folder.string() + ".lock");
  if (fs::exists(folder / kCompleteMarker)) return folder.string();  // made while this process waited
  if (!RemoveTree(folder.string())) throw std::runtime_error("could not clear " + folder.string());
  fs::create_directories(folder);
  try {
    make(folder.string());
  } catch (...) {
    RemoveTree(folder.string());
    throw;
  }
  std::ofstream(folder / kCompleteMarker) << absl::StrJoin(command, " ") << "\n";
  return folder.string();
}

void RunPythonInto(const std::vector<std::string>& script_and_args, const std::string& out, const std::string& what) {
  std::vector<std::string> command = script_and_args;
  command.insert(command.end(), {"--out", out});
  const CommandResult result = RunCommand(LLMC_PYTHON, command, absl::Seconds(240));
  if (result.exit_code != 0) throw std::runtime_error(what + " failed:\n" + result.output);
}

}  // namespace llmc::testing
