# Locates the CUTLASS/CuTe 4.2 headers (used by the GEMM only). Order:
#   1. -DQUACK_CUTLASS_INCLUDE=<dir> or the environment variable QUACK_CUTLASS_INCLUDE
#      (the offline GPU machine: a folder carried with the checkout, e.g. .deps/cutlass/include);
#   2. <source>/.deps/cutlass/include (scripts/fetch_cutlass.sh puts a copy there);
#   3. the pip package nvidia-cutlass==4.2.0.0: <site-packages>/cutlass_library/source/include.
# Defines QUACK_CUTLASS_FOUND and the interface target quack::cutlass_headers.
set(QUACK_CUTLASS_INCLUDE "$ENV{QUACK_CUTLASS_INCLUDE}" CACHE PATH "CUTLASS include folder")
if(NOT QUACK_CUTLASS_INCLUDE AND EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/.deps/cutlass/include/cute/tensor.hpp")
  set(QUACK_CUTLASS_INCLUDE "${CMAKE_CURRENT_SOURCE_DIR}/.deps/cutlass/include" CACHE PATH "CUTLASS include folder" FORCE)
endif()
if(NOT QUACK_CUTLASS_INCLUDE)
  find_package(Python3 COMPONENTS Interpreter QUIET)
  if(Python3_FOUND)
    execute_process(
      COMMAND ${Python3_EXECUTABLE} -c
        "import cutlass_library, os; print(os.path.join(os.path.dirname(cutlass_library.__file__), 'source', 'include'))"
      OUTPUT_VARIABLE _quack_cutlass OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
    if(_quack_cutlass AND EXISTS "${_quack_cutlass}/cute/tensor.hpp")
      set(QUACK_CUTLASS_INCLUDE "${_quack_cutlass}" CACHE PATH "CUTLASS include folder" FORCE)
    endif()
  endif()
endif()
if(QUACK_CUTLASS_INCLUDE AND EXISTS "${QUACK_CUTLASS_INCLUDE}/cute/tensor.hpp")
  set(QUACK_CUTLASS_FOUND TRUE)
  add_library(quack_cutlass_headers INTERFACE)
  add_library(quack::cutlass_headers ALIAS quack_cutlass_headers)
  target_include_directories(quack_cutlass_headers SYSTEM INTERFACE ${QUACK_CUTLASS_INCLUDE})
  message(STATUS "QuACK: CUTLASS headers in ${QUACK_CUTLASS_INCLUDE}")
else()
  set(QUACK_CUTLASS_FOUND FALSE)
  message(STATUS "QuACK: CUTLASS headers not found (GEMM disabled); "
                 "pip install --no-deps nvidia-cutlass==4.2.0.0 or set QUACK_CUTLASS_INCLUDE")
endif()
