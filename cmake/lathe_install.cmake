# lathe as a CMake package: `cmake --install build --prefix P` puts the layers' headers under
# P/include/lathe/<layer>/ (they include each other as "core/tensor.h", so P/include/lathe is the
# include directory of the imported targets), the libraries under P/lib, the `lathe` program under
# P/bin, and P/lib/cmake/lathe/ with latheConfig.cmake, latheConfigVersion.cmake and the exported
# targets. `find_package(lathe 0.1 REQUIRED)` then gives one imported target per layer:
# lathe::core, lathe::nn, lathe::optim, lathe::serialize, lathe::data, lathe::train, lathe::ref,
# each linking the layers below it, with the dependencies the build had (OpenBLAS, MPI, CUDA)
# found again by the config. tests/consumer/ is such a project; tools/check_package.sh builds it
# against an installed tree (run by tools/test.sh).
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LATHE_LAYERS core nn optim serialize data train ref)
foreach(layer ${LATHE_LAYERS})
  set_target_properties(lathe_${layer} PROPERTIES EXPORT_NAME ${layer})
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${layer}/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lathe/${layer}
          FILES_MATCHING PATTERN "*.h")
endforeach()
set_target_properties(lathe_flags PROPERTIES EXPORT_NAME flags)
set(LATHE_EXPORTED lathe_flags)
foreach(layer ${LATHE_LAYERS})
  list(APPEND LATHE_EXPORTED lathe_${layer})
endforeach()

if(LATHE_CUDA)
  # The CUDA backend registers itself with core during static initialisation, so its objects must
  # be linked whole into a program, never drawn from an archive (where nothing would reference
  # them): an imported object library, whose objects lathe::core puts on its consumers' link line
  # ($<TARGET_OBJECTS> as a link item reaches them transitively, the library's name alone does not).
  set_target_properties(lathe_cuda PROPERTIES EXPORT_NAME cuda)
  install(TARGETS lathe_cuda EXPORT latheTargets OBJECTS DESTINATION ${CMAKE_INSTALL_LIBDIR}/lathe)
  target_link_libraries(lathe_core INTERFACE "$<INSTALL_INTERFACE:lathe::cuda;$<TARGET_OBJECTS:lathe::cuda>>")
endif()

install(TARGETS ${LATHE_EXPORTED} EXPORT latheTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/lathe ${CMAKE_INSTALL_INCLUDEDIR})
if(TARGET lathe)
  install(TARGETS lathe RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
install(EXPORT latheTargets NAMESPACE lathe:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lathe)

# What the config must find again: the optional dependencies as this build linked them.
get_target_property(_lathe_core_links lathe_core INTERFACE_LINK_LIBRARIES)
get_target_property(_lathe_train_links lathe_train LINK_LIBRARIES)
set(LATHE_WITH_OPENBLAS OFF)
set(LATHE_WITH_MPI OFF)
if("PkgConfig::OPENBLAS" IN_LIST _lathe_core_links)
  set(LATHE_WITH_OPENBLAS ON)
endif()
if("MPI::MPI_CXX" IN_LIST _lathe_train_links)
  set(LATHE_WITH_MPI ON)
endif()
set(LATHE_WITH_CUDA ${LATHE_CUDA})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/latheConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/latheConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lathe)
# 0.x: a minor version may break what the one before it offered, so 0.1 accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/latheConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
# lathe_cuda.cmake goes along: latheConfig.cmake applies its workaround before it finds the toolkit.
install(FILES ${PROJECT_BINARY_DIR}/latheConfig.cmake ${PROJECT_BINARY_DIR}/latheConfigVersion.cmake
        ${PROJECT_SOURCE_DIR}/cmake/lathe_cuda.cmake DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/lathe)
