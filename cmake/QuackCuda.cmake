# CUDA settings for every QuACK target: sm_90a only (set before project()), C++17, Release with -lineinfo, spill warnings; ccache when present.
if(NOT CMAKE_BUILD_TYPE AND NOT CMAKE_CONFIGURATION_TYPES)
  set(CMAKE_BUILD_TYPE Release CACHE STRING "" FORCE)
endif()
if(NOT CMAKE_CUDA_ARCHITECTURES MATCHES "90a")
  message(FATAL_ERROR "QuACK needs CMAKE_CUDA_ARCHITECTURES=90a-real (got ${CMAKE_CUDA_ARCHITECTURES})")
endif()
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
find_package(CUDAToolkit 12.8 REQUIRED)

find_program(QUACK_CCACHE ccache)
if(QUACK_CCACHE)
  # base_dir: paths under the source tree are hashed relative, so clones and worktrees at other
  # paths (CI clones, helpers' worktrees) share cache entries.
  # (ccache 4.7 takes no key=value arguments: the setting travels in the environment.)
  set(CMAKE_CXX_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} ${QUACK_CCACHE})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${CMAKE_COMMAND} -E env CCACHE_BASEDIR=${CMAKE_SOURCE_DIR} ${QUACK_CCACHE})
endif()

function(quack_cuda_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-lineinfo -Xptxas=-warn-spills -Xptxas=-warn-lmem-usage>
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  # Host code that includes CuTe needs CCCL's headers (cuda/std/...).
  target_include_directories(${target} PRIVATE ${CUDAToolkit_INCLUDE_DIRS}/cccl)
endfunction()
