# The CMake settings of a CUDA build, one list for every place that makes one:
#   cmake -S . -B build-cuda -G Ninja -C cmake/cuda.cmake [-DCMAKE_PREFIX_PATH=<libtorch>]
# used by scripts/cuda-build-check.sh (Debian's CUDA libtorch, no GPU) and
# scripts/gpu-check.sh (the PyTorch wheel's libtorch on a GPU machine).
set(CMAKE_BUILD_TYPE Release CACHE STRING "Build type")
# Hopper (H100, H200): sm_90. libtorch's CMake reads TORCH_CUDA_ARCH_LIST.
set(TORCH_CUDA_ARCH_LIST "9.0" CACHE STRING "CUDA architectures libtorch's CMake compiles for")
set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures")
# Configure fails unless the libtorch found has CUDA (c10_cuda, torch_cuda):
# a CPU libtorch found by mistake is an error, not a silent CPU build.
set(PROTOCOL_REQUIRE_CUDA ON CACHE BOOL "Require a CUDA libtorch")
