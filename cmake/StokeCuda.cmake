# STOKE_CUDA=AUTO builds the CUDA backend whenever nvcc is found, so every kernel is
# compiled on machines without a GPU too (CI); ON makes a missing toolkit an error.
set(STOKE_HAVE_CUDA OFF)
if(NOT STOKE_CUDA STREQUAL "OFF" AND NOT STOKE_FUZZ)
  include(CheckLanguage)
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(CMAKE_CUDA_ARCHITECTURES "${STOKE_CUDA_ARCHS}")
    enable_language(CUDA)
    # CMake 3.25 does not know nvcc's C++20 flag; device code needs only C++17.
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    set(STOKE_HAVE_CUDA ON)
  elseif(STOKE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "STOKE_CUDA=ON but no CUDA compiler (nvcc) was found")
  endif()
endif()
message(STATUS "stoke: CUDA backend ${STOKE_HAVE_CUDA} (STOKE_CUDA=${STOKE_CUDA}, archs ${STOKE_CUDA_ARCHS})")

# NCCL for the gradient all-reduce of data-parallel training on CUDA
# (src/cuda/nccl/): needs the CUDA backend and MPI (which carries NCCL's
# unique id to the ranks). AUTO builds it when nccl.h is found — the CUDA
# toolkit's own copy, or NVIDIA's libnccl-dev; ON makes a missing header an
# error. libnccl.so.2 is opened at run time (dlopen), not linked, so the
# binary starts where NCCL is not installed; without NCCL in the build, CUDA
# training under mpirun refuses in one line.
set(STOKE_HAVE_NCCL OFF)
if(STOKE_HAVE_CUDA AND STOKE_HAVE_MPI AND NOT STOKE_NCCL STREQUAL "OFF")
  find_path(STOKE_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS} ${CUDAToolkit_LIBRARY_ROOT}/include)
  if(STOKE_NCCL_INCLUDE_DIR)
    set(STOKE_HAVE_NCCL ON)
  elseif(STOKE_NCCL STREQUAL "ON")
    message(FATAL_ERROR "STOKE_NCCL=ON but nccl.h was not found (install libnccl-dev, or set STOKE_NCCL_INCLUDE_DIR)")
  endif()
elseif(STOKE_NCCL STREQUAL "ON")
  message(FATAL_ERROR "STOKE_NCCL=ON needs the CUDA backend and MPI (STOKE_CUDA, STOKE_MPI)")
endif()
message(STATUS "stoke: NCCL data-parallel training on CUDA ${STOKE_HAVE_NCCL} (STOKE_NCCL=${STOKE_NCCL})")
