#!/usr/bin/env bash
# Installs every Debian package stoke's build, tests, fuzzers and benchmarks need.
# Idempotent: packages already present are not fetched again.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git
  libutf8proc-dev libsentencepiece-dev nlohmann-json3-dev libsimdjson-dev
  libssl-dev libboost-dev libcli11-dev libfmt-dev libgtest-dev libgmock-dev libbenchmark-dev libdnnl-dev
  ocl-icd-opencl-dev   # Debian's oneDNN CMake config finds OpenCL; libdnnl-dev only recommends it
  clang libclang-rt-14-dev libomp-dev   # libFuzzer targets (clang builds need its OpenMP)
  python3 python3-venv python3-sentencepiece sentencepiece   # benchmark peers
  python3-dev   # the Python package's extension (pip install ./python, scripts/python-tests.sh)
  ca-certificates   # Debian's pip (in every venv) checks PyPI against the system's CA bundle
  libopenmpi-dev openmpi-bin   # data-parallel training (optional at build time; its tests skip without mpirun)
  chromium   # test_html_report renders the doctor's HTML report headless (skipped without it)
  python3-numpy python3-scipy   # test_output_shards reads the CSR / ragged shards back with numpy + scipy (skipped without)
  # The Slurm test (scripts/slurm/test-array.sh, ~1 minute) runs a single-node
  # cluster from these; the Kubernetes manifests are parsed with PyYAML.
  # Both tests skip themselves where the packages are missing.
  munge slurmctld slurmd slurm-client python3-yaml
)

missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The CUDA backend is compiled whenever nvcc is found (STOKE_CUDA=AUTO); it is
# not a Debian package here, so only report whether it is present.
if command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "setup: CUDA toolkit found; the CUDA backend will be compiled"
else
  echo "setup: no CUDA toolkit (nvcc); building the CPU backend only"
fi
