# qcc_add_fuzzer(NAME SOURCES src... LIBS lib...)
#
# One fuzz target: SOURCES define LLVMFuzzerTestOneInput (fuzz/README.md).
#   QCC_FUZZ ON (clang): qcc-fuzz-NAME, a libFuzzer binary built with
#     -fsanitize=fuzzer,address,undefined, which scripts/fuzz.sh runs over
#     fuzz/corpus/NAME (seeds) with fuzz/NAME.dict when it exists.
#   otherwise: qcc-fuzz-NAME-replay, the same sources with fuzz/ReplayMain.cpp,
#     and the ctest test fuzz-replay-NAME, which feeds it every file of
#     fuzz/corpus/NAME and test/fuzz-regressions/NAME (inputs that once
#     crashed), so every build replays them under its own flags (the
#     sanitizer build of scripts/test.sh included).
function(qcc_add_fuzzer name)
  cmake_parse_arguments(ARG "" "" "SOURCES;LIBS" ${ARGN})
  if(QCC_FUZZ)
    set(target qcc-fuzz-${name})
    add_executable(${target} ${ARG_SOURCES})
    add_dependencies(qcc-fuzzers ${target})
    target_compile_options(${target} PRIVATE -fsanitize=fuzzer)
    target_link_options(${target} PRIVATE -fsanitize=fuzzer)
  else()
    set(target qcc-fuzz-${name}-replay)
    add_executable(${target} ${ARG_SOURCES}
      ${PROJECT_SOURCE_DIR}/fuzz/ReplayMain.cpp)
    if(QCC_BUILD_TESTS)
      add_test(NAME fuzz-replay-${name}
        COMMAND ${target} ${PROJECT_SOURCE_DIR}/fuzz/corpus/${name}
                ${PROJECT_SOURCE_DIR}/test/fuzz-regressions/${name})
      set_tests_properties(fuzz-replay-${name} PROPERTIES TIMEOUT 300)
    endif()
  endif()
  target_link_libraries(${target} PRIVATE ${ARG_LIBS})
  target_include_directories(${target} PRIVATE ${PROJECT_SOURCE_DIR})
endfunction()

# The fuzz build instruments everything it compiles (the libraries a target
# links included) with AddressSanitizer and UBSan; libFuzzer's coverage
# instrumentation is added per target above and, for the libraries, here.
if(QCC_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "QCC_FUZZ needs clang (libFuzzer): configure with "
                        "-DCMAKE_CXX_COMPILER=clang++ (scripts/fuzz.sh does)")
  endif()
  # -O1 -gline-tables-only (after the build type's -O2 -g, so they win):
  # what the sanitizers' reports need (file:line), at about half the compile
  # time of full debug info over MLIR's templates (the importer target is
  # built in every scripts/test.sh run).
  # Every target (scripts/fuzz.sh builds this, not the whole tree).
  add_custom_target(qcc-fuzzers)
  # No vptr check: LLVM's classes have no RTTI (Debian's libLLVM is built
  # -fno-rtti), so every virtual call on them from a file with RTTI would be
  # reported.
  add_compile_options(-fsanitize=address,undefined,fuzzer-no-link
    -fno-sanitize=vptr -fno-sanitize-recover=undefined -fno-omit-frame-pointer
    -O1 -gline-tables-only)
  add_link_options(-fsanitize=address,undefined)
endif()
