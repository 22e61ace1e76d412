#pragma once
// Catch2 2.x (Debian 12: one header) or 3.x (Debian 13: a compiled library). Tests use the 2.x names; where 3.x
// renamed them, the 2.x spelling is given here so no test needs to know which one it was built with.
#ifndef LLMC_CATCH2_MAJOR
#error "tests/CMakeLists.txt defines LLMC_CATCH2_MAJOR from the Catch2 it found"
#endif
#if LLMC_CATCH2_MAJOR >= 3
#include <catch2/catch_all.hpp>
#include <string>

namespace Catch {
inline Matchers::StringContainsMatcher Contains(const std::string& text,
                                                CaseSensitive case_sensitivity = CaseSensitive::Yes) {
  return Matchers::ContainsSubstring(text, case_sensitivity);
}
using Matchers::EndsWith;
using Matchers::Equals;
using Matchers::Matches;
using Matchers::StartsWith;
}  // namespace Catch
using Catch::Approx;
#else
#include <catch2/catch.hpp>
#endif
