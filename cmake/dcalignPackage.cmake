# Install rules and the CMake package. `cmake --install BUILD --prefix P` installs
#   P/include/dcalign/*.hpp          the public headers (those of the layers that were built)
#   P/lib/libdcalign*.a (or .so)     the libraries
#   P/bin/dcalign, dcalign-experiment, dcalign-client, dcalign-mpi (those built)
#   P/lib/cmake/dcalign/             dcalignConfig.cmake, its version file and the exported targets
# so that another project writes find_package(dcalign 0.3 CONFIG REQUIRED [COMPONENTS ...]).
# The build tree is a package too: dcalign_DIR=BUILD.
#
# Components, one export set each, so that a project that only aligns needs none of LibTorch,
# LIBSVM and XGBoost: the core dcalign::dcalign (alignment, user side, NPY) is always imported; data
# (dcalign::data), learn (dcalign::learn), torch (dcalign::torch, the LibTorch tensor API) and
# experiment (dcalign::experiment) only when asked for, each with the find_dependency calls of
# its own link interface (cmake/dcalignConfig.cmake.in).
include(CMakePackageConfigHelpers)

set(DCALIGN_INSTALL_CMAKEDIR "${CMAKE_INSTALL_LIBDIR}/cmake/dcalign"
    CACHE STRING "Where the CMake package files are installed (relative to the prefix)")

set_target_properties(dcalign PROPERTIES EXPORT_NAME dcalign)
install(TARGETS dcalign EXPORT dcalignTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(EXPORT dcalignTargets NAMESPACE dcalign:: DESTINATION ${DCALIGN_INSTALL_CMAKEDIR})
export(EXPORT dcalignTargets NAMESPACE dcalign::
       FILE ${PROJECT_BINARY_DIR}/dcalignTargets.cmake)

# component target public-header
set(dcalign_optional_layers
    "data dcalign_data data.hpp"
    "learn dcalign_learn learn.hpp"
    "torch dcalign_torch torch.hpp"
    "experiment dcalign_experiment experiment.hpp")
set(DCALIGN_PACKAGE_COMPONENTS "")
set(dcalign_header_excludes "")
foreach(entry IN LISTS dcalign_optional_layers)
  separate_arguments(entry)
  list(GET entry 0 component)
  list(GET entry 1 target)
  list(GET entry 2 header)
  if(TARGET ${target})
    list(APPEND DCALIGN_PACKAGE_COMPONENTS ${component})
    set_target_properties(${target} PROPERTIES EXPORT_NAME ${component})
    install(TARGETS ${target} EXPORT dcalign-${component}Targets
            ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
            LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
            RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    install(EXPORT dcalign-${component}Targets NAMESPACE dcalign::
            DESTINATION ${DCALIGN_INSTALL_CMAKEDIR})
    export(EXPORT dcalign-${component}Targets NAMESPACE dcalign::
           FILE ${PROJECT_BINARY_DIR}/dcalign-${component}Targets.cmake)
  else()
    # A layer that was not built leaves its header out as well.
    list(APPEND dcalign_header_excludes PATTERN ${header} EXCLUDE)
  endif()
endforeach()

install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/dcalign
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.hpp" ${dcalign_header_excludes})

# The command line; dcalign runs dcalign-experiment, dcalign-client and dcalign-mpi from its own
# directory (src/cli).
install(TARGETS dcalign_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
if(TARGET dcalign_experiment_cli)
  install(TARGETS dcalign_experiment_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET dcalign_experiment_mpi_cli)
  install(TARGETS dcalign_experiment_mpi_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET dcalign_mpi_cli)
  install(TARGETS dcalign_mpi_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
if(TARGET dcalign_client_cli)
  install(TARGETS dcalign_client_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()

# One config file serves the install tree and the build tree: it has no paths of its own (the
# targets files locate themselves), so it is written once into the build tree and installed.
configure_package_config_file(
  ${PROJECT_SOURCE_DIR}/cmake/dcalignConfig.cmake.in ${PROJECT_BINARY_DIR}/dcalignConfig.cmake
  INSTALL_DESTINATION ${DCALIGN_INSTALL_CMAKEDIR} NO_SET_AND_CHECK_MACRO)
# dcalign is 0.x: under semantic versioning a minor release may change the API, so a request
# for 0.2 accepts 0.2.z only (SameMinorVersion). SameMajorVersion would let a 0.3 that dropped
# a function satisfy find_package(dcalign 0.3); AnyNewerVersion would also accept 1.x. From 1.0
# on, SameMajorVersion is the right policy.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/dcalignConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/dcalignConfig.cmake
              ${PROJECT_BINARY_DIR}/dcalignConfigVersion.cmake
        DESTINATION ${DCALIGN_INSTALL_CMAKEDIR})
