#ifndef LLMC_TESTS_SUPPORT_PACKAGE_MANIFEST_H_
#define LLMC_TESTS_SUPPORT_PACKAGE_MANIFEST_H_

#include <fstream>
#include <string>

#include "nlohmann/json.hpp"

namespace llmc::testing {

// The manifest (llmc-model.json) of the package in `dir`.
inline nlohmann::json ReadPackageManifest(const std::string& dir) {
  nlohmann::json manifest;
  std::ifstream(dir + "/llmc-model.json") >> manifest;
  return manifest;
}

}  // namespace llmc::testing

#endif  // LLMC_TESTS_SUPPORT_PACKAGE_MANIFEST_H_
