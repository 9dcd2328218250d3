# The Debian packages protocol needs, in one place. Sourced (not run) by
# scripts/setup.sh (Debian 12, CPU libtorch) and scripts/cuda-build-check.sh
# (a Debian trixie root with the CUDA libtorch); each adds its own libtorch.

# Compiler, build tools and the C++ libraries the code includes (libtorch aside).
BUILD_PACKAGES=(
  cmake ninja-build g++ pkg-config git
  libyaml-cpp-dev libsqlite3-dev sqlite3
  libspdlog-dev libfmt-dev doctest-dev libcli11-dev nlohmann-json3-dev
  libkainjow-mustache-dev
  libsentencepiece-dev sentencepiece       # tokenizer library; spm_train makes the tests' tokenizers
  libsnappy-dev libzstd-dev zlib1g-dev      # the codecs of parquet pages (training/decompress.cc)
)

# What the test suite uses besides the build.
TEST_PACKAGES=(
  python3                                   # the command-backend demo workload (tests/cli/cli_demo_test.cc)
  iproute2                                  # ip/tc: network namespaces for the two-node rehearsal tests
  openssh-server openssh-client             # a real sshd on localhost for the ssh launcher's test
  chromium                                  # headless: the HTML report as a reader sees it (tests/cli/report_screen_test.cc)
)

# Debian 12's CPU libtorch.
CPU_TORCH_PACKAGES=(
  libtorch-dev libopenblas0-openmp          # libtorch 1.13 (CPU) + an optimised BLAS (~18x faster than reference)
  libgloo-dev                               # Gloo headers for c10d process groups (distributed fsdp / share)
  python3-torch                             # the same PyTorch for Python: the peer (bench/peer) in gpu-check.sh's rehearsal
)

# Debian trixie's CUDA libtorch (contrib, non-free). libgloo-dev (CPU) would
# remove libtorch-cuda-dev: its CUDA twin is used there.
CUDA_TORCH_PACKAGES=(
  libtorch-cuda-dev libgloo-cuda-dev nvidia-cuda-toolkit libnccl-dev libopenblas0-openmp
)

# A one-node Slurm for tests/native/launch/slurm_test.cc (scripts/slurm-local.sh).
SLURM_PACKAGES=(munge slurmctld slurmd slurm-client)
