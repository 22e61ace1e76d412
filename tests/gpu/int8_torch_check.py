"""The int8 CUDA operator through its libtorch glue, against torch on the same GPU.

Builds worker/model/int8_linear_cuda.cc and its kernels as a torch extension (the CUDA PyTorch of a GPU
machine; scripts/gpu-check-int8.sh runs it), checks results and when the operator applies, and times it
against torch's own bfloat16 linear on Qwen2-0.5B's LM head and MLP widths. Exit status 1 on a wrong result.
  python3 tests/gpu/int8_torch_check.py [--build-only]
"""
import os
import sys

import torch
from torch.utils.cpp_extension import load

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def build():
    return load(
        name="llmc_int8_cuda",
        sources=[
            os.path.join(REPO, "tests/gpu/int8_torch_binding.cc"),
            os.path.join(REPO, "worker/model/int8_linear_cuda.cc"),
            os.path.join(REPO, "worker/model/dequantized_slices_cuda.cc"),
            os.path.join(REPO, "worker/model/int8_linear_cuda_kernels.cu"),
        ],
        extra_include_paths=[REPO],
        extra_cflags=["-O2"],
        extra_cuda_cflags=["-O3"],
        verbose=False,
    )


def reference(x, weight, scales):
    group = weight.shape[1] // scales.shape[1]
    dequantized = weight.double() * scales.double().repeat_interleave(group, dim=1)
    return x.double() @ dequantized.T


def check_results(ext):
    failures = 0
    generator = torch.Generator(device="cuda").manual_seed(5)
    for rows, columns, k_size, groups, dtype, with_bias in [
        (1, 896, 896, 1, torch.bfloat16, True),
        (7, 4864, 896, 1, torch.bfloat16, False),
        (32, 896, 4864, 38, torch.bfloat16, False),
        (5, 151936, 896, 1, torch.bfloat16, False),
        (1, 333, 128, 2, torch.float32, True),
        (1, 128, 896, 7, torch.float32, False),
        # Two launches of the kernel: a matrix of 16 M weights or more, up to 64 rows.
        (50, 151936, 896, 1, torch.bfloat16, True),
        (64, 18725, 896, 7, torch.bfloat16, False),
        # Past the streamed rows: dequantized a slice at a time (the LM head in five slices, the last short).
        (33, 896, 896, 1, torch.bfloat16, True),
        (100, 151936, 896, 1, torch.bfloat16, False),
        (512, 4864, 896, 7, torch.bfloat16, True),
        (2, 333, 128, 2, torch.float32, True),
        (70, 151936, 896, 1, torch.float32, False),
    ]:
        x = torch.randn(rows, k_size, device="cuda", dtype=dtype, generator=generator)
        weight = torch.randint(-128, 128, (columns, k_size), device="cuda", dtype=torch.int8, generator=generator)
        scales = torch.rand(columns, groups, device="cuda", generator=generator) / 100 + 1e-4
        bias = torch.randn(columns, device="cuda", dtype=dtype, generator=generator) if with_bias else None
        assert ext.applies(x, weight, scales)
        streamed = ext.streams(x, weight)
        out = ext.linear(x, weight, scales, bias)
        got = out.double()
        want = reference(x, weight, scales) + (bias.double() if with_bias else 0)
        magnitude = (x.double().abs() @ (weight.double().abs() *
                     scales.double().repeat_interleave(k_size // groups, dim=1)).T)
        # bfloat16 weight * scale (group scales on tensor cores, every dequantized weight) errs by 2^-9 a term;
        # a bfloat16 output is rounded once, bias included.
        weights_rounded = dtype == torch.bfloat16 and (groups > 1 or not streamed)
        relative = 1 / 256 if weights_rounded else 1e-4
        rounding = want.abs() / 256 if dtype == torch.bfloat16 else 0
        worst = ((got - want).abs() - magnitude * relative - rounding).max().item()
        ok = (worst <= 1e-6 and out.dtype == dtype and out.shape == (rows, columns)
              and streamed == (rows <= (32 if dtype == torch.bfloat16 else 1) or
                               (dtype == torch.bfloat16 and rows <= 64 and columns * k_size >= 16 << 20)))
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} rows {rows:3d} {columns}x{k_size} groups {groups:2d} {dtype} "
              f"bias {with_bias} {'streamed' if streamed else 'dequantized'}: "
              f"max |got - want| {(got - want).abs().max().item():.3g}, out {out.dtype}")
    # The dequantizer alone: weight * scale rounded once, bit for bit.
    for columns, k_size, groups, dtype in [(4864, 896, 1, torch.bfloat16), (333, 128, 2, torch.float32),
                                           (96, 4864, 38, torch.bfloat16), (7, 16, 1, torch.float32)]:
        weight = torch.randint(-128, 128, (columns, k_size), device="cuda", dtype=torch.int8, generator=generator)
        scales = torch.rand(columns, groups, device="cuda", generator=generator) / 100 + 1e-4
        want = (weight.float() * scales.repeat_interleave(k_size // groups, dim=1)).to(dtype)
        got = ext.dequantize(weight, scales, dtype == torch.bfloat16)
        ok = got.dtype == dtype and torch.equal(got, want)
        failures += not ok
        print(f"{'ok  ' if ok else 'FAIL'} dequantize {columns}x{k_size} groups {groups} to {dtype}: bit for bit")
    # Where the composite must dequantize with torch operators instead.
    x = torch.randn(33, 896, device="cuda", dtype=torch.bfloat16)
    weight = torch.zeros(64, 896, device="cuda", dtype=torch.int8)
    scales = torch.ones(64, 1, device="cuda")
    for name, args, want in [
        ("33 rows", (x, weight, scales), True),
        ("weights on the CPU", (x[:4], weight.cpu(), scales), False),
        ("float16 activations", (x[:4].half(), weight, scales), False),
        ("float32 activations", (x[:2].float(), weight, scales), True),
        ("K not a multiple of 16", (x[:4, :40], weight[:, :40], scales), False),
        ("weights not contiguous", (x[:4, :448], weight[:, :448], scales), False),
    ]:
        got = ext.applies(*args)
        failures += got != want
        print(f"{'ok  ' if got == want else 'FAIL'} applies with {name}: {got}")
    # Which of those stream the weights through the kernel rather than dequantize slices for cuBLAS.
    large = torch.zeros(18725, 896, device="cuda", dtype=torch.int8)  # just over 16 M weights
    x65 = torch.randn(65, 896, device="cuda", dtype=torch.bfloat16)
    for name, rows_x, streamed_weight, want in [
        ("33 rows", x, weight, False),
        ("32 rows", x[:32], weight, True),
        ("33 rows, 16 M weights (two launches)", x, large, True),
        ("64 rows, 16 M weights (two launches)", x65[:64], large, True),
        ("65 rows, 16 M weights", x65, large, False),
        ("33 rows, just under 16 M weights", x, large[:18724], False),
        ("float32 activations, 1 row", x[:1].float(), weight, True),
        ("float32 activations, 2 rows (dequantizing is faster)", x[:2].float(), weight, False),
        ("float32 activations, 2 rows, 16 M weights", x[:2].float(), large, False),
        ("bfloat16 activations off a 16-byte boundary, 2 rows", x.view(-1)[1:1 + 2 * 896].view(2, 896), weight,
         False),
    ]:
        got = ext.streams(rows_x, streamed_weight)
        failures += got != want
        print(f"{'ok  ' if got == want else 'FAIL'} streams weights with {name}: {got}")
    return failures


def time_us(function, replays=50):
    for _ in range(3):
        function()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(10):
            function()
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(replays):
        graph.replay()
    stop.record()
    torch.cuda.synchronize()
    return start.elapsed_time(stop) * 1000 / replays / 10


def compare_with_torch(ext):
    print(f"\n{torch.cuda.get_device_name()}, torch {torch.__version__}: microseconds per product "
          "(CUDA graph of 10, mean of 50 replays; weights reused, so the smaller ones sit in L2)")
    print(f"{'columns x K':>14} {'rows':>4} {'llmc int8':>10} {'torch bf16 linear':>18} {'ratio':>6}")
    for columns, k_size in [(151936, 896), (6144, 4096), (4864, 896), (896, 4864)]:
        weight = torch.randint(-128, 128, (columns, k_size), device="cuda", dtype=torch.int8)
        scales = torch.rand(columns, 1, device="cuda") / 100
        weight16 = (weight.float() * scales).bfloat16()
        for rows in (1, 8, 16, 32, 33, 64, 65, 512):
            x = torch.randn(rows, k_size, device="cuda", dtype=torch.bfloat16)
            int8_us = time_us(lambda: ext.linear(x, weight, scales))
            bf16_us = time_us(lambda: torch.nn.functional.linear(x, weight16))
            print(f"{columns:>6} x {k_size:<5} {rows:>4} {int8_us:>10.2f} {bf16_us:>18.2f} {bf16_us / int8_us:>6.2f}")


def main():
    if not torch.cuda.is_available():
        print("no CUDA device")
        return 1
    ext = build()
    if "--build-only" in sys.argv:
        return 0
    failures = check_results(ext)
    compare_with_torch(ext)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
