# syntax=docker/dockerfile:1
# The CUDA worker, built with BuildKit from the repository root:
#   docker build -f deploy/docker/worker-cuda.Dockerfile -t llmc/worker-cuda:0.1.0 .
# libtorch is the C++ side of PyTorch's CUDA wheel (its libraries and CMake package); nvcc and the CUDA
# headers come from NVIDIA's Debian 12 repository. Everything else is the same Debian 12 build as the CPU
# images, so the runtime is Debian too: nvidia/cuda images are Ubuntu or RHEL based and would not carry
# Debian 12's gRPC, abseil and protobuf libraries. The CUDA user-space libraries ship in the wheel's
# nvidia-* dependencies; the driver comes from the node through the NVIDIA container toolkit.
ARG BUILDER_IMAGE=debian:12
ARG RUNTIME_IMAGE=debian:12-slim

FROM ${BUILDER_IMAGE} AS builder
WORKDIR /src
COPY scripts/install-deps.sh scripts/
RUN scripts/install-deps.sh && rm -rf /var/lib/apt/lists/*
# Keep the toolkit's minor version equal to the wheel's (cu126 <-> 12-6).
ARG CUDA_APT_VERSION=12-6
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates curl python3-venv \
    && curl -fsSLo /tmp/cuda-keyring.deb \
       https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/cuda-keyring_1.1-1_all.deb \
    && dpkg -i /tmp/cuda-keyring.deb \
    && rm /tmp/cuda-keyring.deb \
    && apt-get update \
    && apt-get install -y --no-install-recommends "cuda-toolkit-${CUDA_APT_VERSION}" \
    && rm -rf /var/lib/apt/lists/*
ENV PATH=/usr/local/cuda/bin:${PATH} \
    CUDACXX=/usr/local/cuda/bin/nvcc
# PyTorch wheels use the C++11 string ABI from 2.7 on; older ones cannot link with Debian's libraries.
ARG TORCH_VERSION=2.7.1
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cu126
RUN python3 -m venv /opt/torch \
    && /opt/torch/bin/pip install --no-cache-dir "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX_URL}"
COPY . .
ARG LLMC_BUILD_JOBS=4
ARG CUDA_ARCHITECTURES="80;86;89;90"
ENV TORCH_CUDA_ARCH_LIST="8.0;8.6;8.9;9.0"
# LLMC_WITH_CUDA=ON makes CMake fail at once if the libtorch it finds has no CUDA.
RUN --mount=type=cache,target=/root/.cache/ccache \
    LLMC_BUILD_JOBS="${LLMC_BUILD_JOBS}" scripts/build.sh \
      -DCMAKE_BUILD_TYPE=Release -DLLMC_BUILD_TESTS=OFF -DLLMC_WERROR=OFF -DLLMC_WITH_CUDA=ON \
      "-DLLMC_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES}" \
      "-DCMAKE_PREFIX_PATH=$(/opt/torch/bin/python -c 'import torch; print(torch.utils.cmake_prefix_path)')"
# libtorch and the CUDA libraries of the wheel, flattened into one folder for LD_LIBRARY_PATH.
RUN mkdir -p /opt/llmc/lib \
    && site="$(/opt/torch/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')" \
    && cp -a "$site"/torch/lib/*.so* /opt/llmc/lib/ \
    && for dir in "$site"/nvidia/*/lib; do cp -a "$dir"/*.so* /opt/llmc/lib/; done

FROM ${RUNTIME_IMAGE} AS worker-cuda
RUN groupadd --system --gid 10001 llmc \
    && useradd --system --uid 10001 --gid llmc --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin llmc
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
       libabsl20220623 libgrpc++1.51 libgrpc29 libprometheus-cpp-core1.0 libprotobuf32 libyaml-cpp0.7 \
       libpcre2-8-0 libutf8proc2 \
    && rm -rf /var/lib/apt/lists/*
COPY --from=builder /opt/llmc/lib /opt/llmc/lib
COPY --from=builder /src/build/worker/llmc-worker /usr/local/bin/llmc-worker
# The NVIDIA container toolkit mounts the driver into containers that ask for these capabilities.
ENV LD_LIBRARY_PATH=/opt/llmc/lib \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
# gRPC (Worker + grpc.health.v1), HTTP /metrics
EXPOSE 21002 21082
ENTRYPOINT ["/usr/local/bin/llmc-worker"]
