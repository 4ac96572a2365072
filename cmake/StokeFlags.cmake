# Warnings, optimisation and sanitizers for every target of the project.
add_compile_options(-Wall -Wextra -Wno-unused-parameter)
add_compile_options($<$<COMPILE_LANGUAGE:C,CXX>:-fno-semantic-interposition>)
if(STOKE_NATIVE)
  add_compile_options(-march=native)
endif()

set(_stoke_san "")
if(STOKE_ASAN)
  list(APPEND _stoke_san address)
endif()
if(STOKE_UBSAN)
  list(APPEND _stoke_san undefined)
endif()
if(STOKE_TSAN)
  list(APPEND _stoke_san thread)
  # target_clones resolvers run while the dynamic loader relocates, before the
  # TSan runtime is up; instrumented, they crash at start. One code path here.
  add_compile_definitions(STOKE_CPU_CLONES=)
endif()
if(STOKE_FUZZ)
  # Fuzz builds instrument every library for coverage; the fuzzer main comes from
  # -fsanitize=fuzzer on the fuzz executables only.
  list(APPEND _stoke_san address undefined fuzzer-no-link)
endif()
if(_stoke_san)
  list(REMOVE_DUPLICATES _stoke_san)
  string(REPLACE ";" "," _stoke_san_csv "${_stoke_san}")
  add_compile_options(-fsanitize=${_stoke_san_csv} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  string(REPLACE "fuzzer-no-link" "" _stoke_link_san "${_stoke_san_csv}")
  string(REPLACE ",," "," _stoke_link_san "${_stoke_link_san}")
  string(REGEX REPLACE ",$" "" _stoke_link_san "${_stoke_link_san}")
  add_link_options(-fsanitize=${_stoke_link_san})
endif()
