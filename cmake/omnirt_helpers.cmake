# omnirt_library(NAME SOURCES ... DEPS ...): one library per layer, includes rooted at src/.
function(omnirt_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(omnirt_${name} ${ARG_SOURCES})
  add_library(omnirt::${name} ALIAS omnirt_${name})
  target_include_directories(omnirt_${name} PUBLIC ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(omnirt_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# omnirt_test(NAME SOURCES ... DEPS ... [TEST_PREFIX P]): one gtest binary, discovered by ctest
# (test names are Suite.Test, or P + Suite.Test with TEST_PREFIX).
function(omnirt_test name)
  cmake_parse_arguments(ARG "" "TEST_PREFIX" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main GTest::gmock)
  target_include_directories(${name} PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  target_compile_definitions(${name} PRIVATE OMNIRT_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
                                             OMNIRT_BINARY_DIR="${PROJECT_BINARY_DIR}")
  gtest_discover_tests(${name} DISCOVERY_TIMEOUT 60 TEST_PREFIX "${ARG_TEST_PREFIX}"
                       PROPERTIES TIMEOUT 300 LABELS "${ARG_LABELS}")
  # The sanitizer subset of CI (make sanitize-ci) builds the binaries of the labels that
  # tests/CMakeLists.txt lists in OMNIRT_SANITIZE_CI_LABELS.
  if(TARGET sanitize_ci_tests AND ARG_LABELS IN_LIST OMNIRT_SANITIZE_CI_LABELS)
    add_dependencies(sanitize_ci_tests ${name})
  endif()
endfunction()
