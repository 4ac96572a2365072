# Third-party libraries, all from Debian 12 packages (scripts/setup.sh installs them).
find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)   # config files, tokenizer.json, JSONL records
find_package(fmt REQUIRED)
find_package(Boost 1.74 REQUIRED)            # Beast + Asio (header-only): stoke serve's HTTP
find_package(simdjson REQUIRED)             # stoke serve's request bodies
find_package(CLI11 REQUIRED)                # command line, --help with defaults
find_package(dnnl REQUIRED)                 # oneDNN: CPU GEMM (f32, bf16 on AVX512-BF16/AMX)
find_package(OpenMP REQUIRED)               # threads inside CPU kernels (oneDNN uses OpenMP too)
pkg_check_modules(UTF8PROC REQUIRED IMPORTED_TARGET libutf8proc)      # Unicode properties, NFD
pkg_check_modules(LIBCRYPTO REQUIRED IMPORTED_TARGET libcrypto)     # SHA-256 with the CPU's SHA extensions
pkg_check_modules(SENTENCEPIECE REQUIRED IMPORTED_TARGET sentencepiece) # XLM-R tokenizer
if(STOKE_TESTS)
  find_package(GTest REQUIRED)
endif()

# MPI (Open MPI from Debian: libopenmpi-dev) for data-parallel training; optional:
# without it `stoke train` runs one process and refuses an MPI launch in one line.
set(STOKE_HAVE_MPI OFF)
if(NOT STOKE_MPI STREQUAL "OFF" AND NOT STOKE_FUZZ)
  if(STOKE_MPI STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(STOKE_HAVE_MPI ON)
  endif()
endif()
message(STATUS "stoke: MPI data-parallel training ${STOKE_HAVE_MPI}")
