#ifndef LLMC_CATCH2_MAJOR
#error "tests/CMakeLists.txt defines LLMC_CATCH2_MAJOR from the Catch2 it found"
#endif
#if LLMC_CATCH2_MAJOR >= 3
#include <catch2/catch_session.hpp>

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
#else
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
#endif
