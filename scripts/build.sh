#!/usr/bin/env bash
# Configures and builds H2 (Release) into ./build. Extra arguments go to cmake's configure step,
# e.g. `scripts/build.sh -DH2_WITH_CUDA=OFF`. The CUDA backend is built wherever nvcc is found.
set -euo pipefail
cd "$(dirname "$0")/.."
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH="$PATH:/usr/local/cuda/bin"
fi
# The Python of the tests/python checks: the venv scripts/test.sh makes, where it exists.
test_python=()
if [[ -x build/venv-test/bin/python ]]; then
  test_python=(-DH2_TEST_PYTHON="$PWD/build/venv-test/bin/python")
fi
# The transformers comparison (tests/python/check_transformers.py) runs where a venv with torch
# and transformers exists at build/venv-transformers (made by hand: about 1 GB from PyPI, so CI
# does not; see tests/python/check_transformers.py).
if [[ -x build/venv-transformers/bin/python ]]; then
  test_python+=(-DH2_TRANSFORMERS_PYTHON="$PWD/build/venv-transformers/bin/python")
fi
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "${test_python[@]}" "$@"
cmake --build build -j "$(nproc)"
