#!/usr/bin/env bash
# Prints the build folder scripts/build.sh and scripts/test.sh use: $LLMC_BUILD_DIR, else build/, or
# build-asan/ / build-tsan/ for a sanitizer build (LLMC_SANITIZE=address,undefined or thread).
case "${LLMC_SANITIZE:-}" in
  "") default_dir=build ;;
  thread) default_dir=build-tsan ;;
  *) default_dir=build-asan ;;
esac
echo "${LLMC_BUILD_DIR:-$default_dir}"
