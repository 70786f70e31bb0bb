#!/usr/bin/env bash
# Installs every build and test dependency of H2 by Debian 12 package name. Run as root.
# Idempotent: apt-get skips what is already installed. The CUDA toolkit and NCCL are not in
# Debian 12's main archive; when nvcc is on PATH the CUDA backend is built, otherwise it is skipped.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git clang-format
  libopenblas-openmp-dev     # BLAS for CPU GEMM; the OpenMP build nests cleanly inside our OpenMP kernels
  libdnnl-dev                # oneDNN matmul: the CPU matmul op's GEMMs (AVX2/AVX-512/AMX at run time)
  ocl-icd-opencl-dev         # OpenCL, which Debian's oneDNN CMake config requires (its GPU runtime)
  libxsmm-dev                # the third GEMM library in bench/gemm_library_bench.cpp (bench only)
  libyaml-cpp-dev            # YAML configs and chip descriptions
  libboost-dev               # Boost.Asio (header-only) for the rendezvous store
  libucx-dev                 # UCX transport (shared memory, TCP, verbs)
  ucx-utils                  # ucx_perftest: the latency peer in bench/comm_bench.sh
  libibverbs-dev             # RDMA verbs transport (builds here; no RDMA in this kernel)
  libopenmpi-dev openmpi-bin # mpirun submission
  libgtest-dev libgmock-dev  # GoogleTest
  nlohmann-json3-dev         # JSON (metrics, traces, safetensors headers)
  libxxhash-dev              # XXH3 checksums of checkpoint files
  libcli11-dev               # command-line parsing
  libspdlog-dev libfmt-dev   # leveled logging and formatting
  python3 python3-venv       # benchmark peers (PyTorch via pip, only in bench/)
  python3-numpy              # tests/python/hf_reference.py: the NumPy Llama reference
  python3-matplotlib         # tools/plot_metrics.py, bench/scale_study.sh's figures
  python3-pandas             # tests/cli/metrics_resume_test.sh: metrics as a dataframe
  clang libclang-rt-14-dev   # libFuzzer and sanitizer runtimes: fuzz/, tools/fuzz.sh
)

if [[ $(id -u) -ne 0 ]]; then
  echo "install_deps.sh: run as root (apt-get install needs it)" >&2
  exit 2
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "install_deps.sh: all ${#packages[@]} packages present"
