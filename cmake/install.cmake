# Install rules for librlx: libraries, header, pkg-config file, CMake package.
# Included from the top-level CMakeLists.txt after the rlx / rlx_static targets.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(RLX_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rlx)

install(TARGETS rlx rlx_static EXPORT rlxTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}   # librlx.so.X.Y.Z + soname links
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}   # librlx.a
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/include/rlx.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})

# --- pkg-config ------------------------------------------------------------
# The prefix is filled in at install time, so `cmake --install --prefix P`
# writes a .pc file for P, whatever CMAKE_INSTALL_PREFIX was configured.
foreach(_rlx_dir IN ITEMS LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${_rlx_dir}}")
    set(RLX_PC_${_rlx_dir} "${CMAKE_INSTALL_${_rlx_dir}}")
  else()
    set(RLX_PC_${_rlx_dir} "\${prefix}/${CMAKE_INSTALL_${_rlx_dir}}")
  endif()
endforeach()

# Libs.private: what a static link of librlx.a needs.
set(RLX_PC_LIBS_PRIVATE "")
foreach(_rlx_lib IN ITEMS ${RLX_OPENBLAS} ${RLX_LAPACKE} ${RLX_ZLIB} ${RLX_DNNL} ${RLX_GOMP})
  get_filename_component(_rlx_name "${_rlx_lib}" NAME_WE)
  string(REGEX REPLACE "^lib" "" _rlx_name "${_rlx_name}")
  string(APPEND RLX_PC_LIBS_PRIVATE " -l${_rlx_name}")
endforeach()
string(APPEND RLX_PC_LIBS_PRIVATE " -L${RLX_LLVM_LIBDIR}")
foreach(_rlx_lib IN LISTS RLX_LLVM_LIBS)
  string(APPEND RLX_PC_LIBS_PRIVATE " ${_rlx_lib}")
endforeach()
string(APPEND RLX_PC_LIBS_PRIVATE " -lpthread -lm")
string(STRIP "${RLX_PC_LIBS_PRIVATE}" RLX_PC_LIBS_PRIVATE)

set(RLX_PC_PREFIX "@RLX_INSTALL_PREFIX@")
configure_file(${CMAKE_CURRENT_LIST_DIR}/rlx.pc.in ${PROJECT_BINARY_DIR}/rlx.pc.tmpl @ONLY)
install(CODE "
  file(READ \"${PROJECT_BINARY_DIR}/rlx.pc.tmpl\" _rlx_pc)
  string(REPLACE \"@RLX_INSTALL_PREFIX@\" \"\${CMAKE_INSTALL_PREFIX}\" _rlx_pc \"\${_rlx_pc}\")
  file(WRITE \"${PROJECT_BINARY_DIR}/rlx.pc\" \"\${_rlx_pc}\")")
install(FILES ${PROJECT_BINARY_DIR}/rlx.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# --- CMake package: find_package(rlx) -> rlx::rlx, rlx::rlx_static -----------
install(EXPORT rlxTargets NAMESPACE rlx:: DESTINATION ${RLX_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/rlxConfig.cmake.in
  ${PROJECT_BINARY_DIR}/rlxConfig.cmake INSTALL_DESTINATION ${RLX_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/rlxConfig.cmake ${PROJECT_BINARY_DIR}/rlxConfigVersion.cmake
  DESTINATION ${RLX_CMAKE_DIR})
