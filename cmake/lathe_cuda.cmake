# Included just before find_package(CUDAToolkit): by cuda/CMakeLists.txt, once CUDA is enabled, and,
# installed beside it, by latheConfig.cmake before it finds the toolkit for a consumer project (whose
# configure stopped on this defect in a stock Debian 12 root).
#
# Works around a defect of FindCUDAToolkit in CMake 3.25.x as Debian 12 ships it (3.25.1). For a
# toolkit of version 10.0 or newer, in a project whose cmake_minimum_required is 3.25 or more, the
# module marks the target CUDA::nvToolsExt as deprecated without first checking that it made that
# target. It makes it only when it finds the library libnvToolsExt, and recent toolkits (CUDA 13
# in /usr/local/cuda, for one) ship only the header-only NVTX 3, so configure stops with
#     set_property could not find TARGET CUDA::nvToolsExt.  Perhaps it has not yet been created.
# Later CMake releases check for the target first.
#
# lathe never links nvToolsExt. When the library cannot be found, this defines CUDA::nvToolsExt
# as an empty placeholder before the module runs: the module creates a CUDA:: target only when no
# target of that name exists, so it keeps the placeholder and its deprecation call succeeds. When
# the library is there, nothing is defined and the module makes the real target as usual.
include_guard(GLOBAL)

if(CMAKE_VERSION VERSION_LESS 3.26 AND NOT TARGET CUDA::nvToolsExt)
  # Look where the module looks: the toolkit's library folders (found from nvcc or the usual
  # hints), the CUDA_PATH environment variable, then the system's default paths.
  set(_lathe_cuda_hints ${CUDAToolkit_ROOT} $ENV{CUDAToolkit_ROOT} /usr/local/cuda)
  if(CMAKE_CUDA_COMPILER)
    get_filename_component(_lathe_nvcc_dir "${CMAKE_CUDA_COMPILER}" DIRECTORY)
    get_filename_component(_lathe_nvcc_dir "${_lathe_nvcc_dir}" DIRECTORY)
    list(APPEND _lathe_cuda_hints "${_lathe_nvcc_dir}")
  endif()
  find_library(LATHE_CUDA_NVTOOLSEXT_LIBRARY
    NAMES nvToolsExt nvToolsExt64 nvToolsExt64_1
    HINTS ${_lathe_cuda_hints} ENV CUDA_PATH
    PATH_SUFFIXES lib64 lib lib/x64 targets/x86_64-linux/lib lib64/stubs lib/stubs)
  mark_as_advanced(LATHE_CUDA_NVTOOLSEXT_LIBRARY)
  if(NOT LATHE_CUDA_NVTOOLSEXT_LIBRARY)
    add_library(CUDA::nvToolsExt INTERFACE IMPORTED GLOBAL)
    message(STATUS "lathe: the CUDA toolkit has no libnvToolsExt (lathe does not use it); "
                   "CUDA::nvToolsExt is an empty placeholder so that FindCUDAToolkit of CMake "
                   "${CMAKE_VERSION} can run")
  endif()
  unset(_lathe_cuda_hints)
  unset(_lathe_nvcc_dir)
endif()
