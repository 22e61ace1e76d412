#!/usr/bin/env bash
# The CUDA int8 kernel on a machine with a GPU: builds its test and bench with nvcc alone (no CMake, gRPC or
# libtorch needed there), runs the test, then the bench side by side with cuBLAS on bfloat16 weights. Where
# that machine has a CUDA PyTorch, the torch-facing operator is also built as an extension and checked
# against torch (tests/gpu/int8_torch_check.py).
#   scripts/gpu-check-int8.sh [output-folder]     CATCH2_INCLUDE=folder holding catch2/catch.hpp
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-build/gpu-check}"
mkdir -p "$out"
rm -f "$out/llmc_int8_cuda_tests" "$out/llmc_int8_cuda_bench"
catch_include="${CATCH2_INCLUDE:-/usr/include}"
nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total --format=csv
nvcc --version | tail -1
torch_check=0
if python3 -c "import torch; assert torch.cuda.is_available()" 2>/dev/null; then
  torch_check=1
  export TORCH_EXTENSIONS_DIR="$out/torch-extensions" MAX_JOBS="${MAX_JOBS:-8}"
  python3 tests/gpu/int8_torch_check.py --build-only >"$out/torch-build.log" 2>&1 &
  torch_build=$!
fi
flags=(-std=c++17 -O3 -arch=native -I. -Xcompiler -Wall)
nvcc "${flags[@]}" -I"$catch_include" -DLLMC_CATCH2_MAJOR=2 -o "$out/llmc_int8_cuda_tests" tests/worker/int8_linear_cuda_test.cc \
  tests/support/catch_main.cc worker/model/int8_linear_cuda_kernels.cu &
test_build=$!
nvcc "${flags[@]}" -o "$out/llmc_int8_cuda_bench" tests/bench/int8_cuda_bench.cu \
  worker/model/int8_linear_cuda_kernels.cu -lcublas &
bench_build=$!
wait "$test_build"
wait "$bench_build"
status=0
"$out/llmc_int8_cuda_tests" --durations yes || status=$?
"$out/llmc_int8_cuda_bench" ${LLMC_GPU_BENCH_ARGS:-} || status=$?
if command -v compute-sanitizer >/dev/null && [ "${LLMC_GPU_SANITIZE:-1}" = 1 ]; then
  timeout 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$out/llmc_int8_cuda_tests" || status=$?
fi
if [ $torch_check = 1 ]; then
  wait "$torch_build" || { cat "$out/torch-build.log"; status=1; }
  python3 tests/gpu/int8_torch_check.py || status=$?
fi
echo "gpu-check-int8: exit status $status"
exit $status
