# The build identity of librlx: a hash of every library source (src/**/*.c,
# *.h, *.def and include/rlx.h), the compiler and its version, the build
# type and the compile flags and definitions of the library's target. The
# disk kernel cache keys every object by it (src/codegen_llvm/cg_disk.c),
# so an object written by any other build of librlx is never loaded.
#
# The hash is computed at build time by rlx_build_id.cmake into
# <binary dir>/rlx_build_id/rlx_build_id.h, which is rewritten only when
# the hash changes (then only cg_disk.c recompiles). The sources are
# globbed with CONFIGURE_DEPENDS, so a new file re-runs the glob; any
# edited source re-runs the hash. No list of files is kept by hand.
#
#   rlx_build_identity(<target> <src dir> <rlx.h>)
function(rlx_build_identity target src_dir header)
  set(out ${CMAKE_CURRENT_BINARY_DIR}/rlx_build_id)
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${src_dir}/*.c ${src_dir}/*.h ${src_dir}/*.def)
  # the flags as the build uses them (generator expressions: per config)
  file(GENERATE OUTPUT ${out}/flags-$<CONFIG>.txt CONTENT
"compiler ${CMAKE_C_COMPILER_ID} ${CMAKE_C_COMPILER_VERSION}
config $<CONFIG>
c_flags ${CMAKE_C_FLAGS} $<$<CONFIG:Release>:${CMAKE_C_FLAGS_RELEASE}>$<$<CONFIG:Debug>:${CMAKE_C_FLAGS_DEBUG}>$<$<CONFIG:RelWithDebInfo>:${CMAKE_C_FLAGS_RELWITHDEBINFO}>$<$<CONFIG:MinSizeRel>:${CMAKE_C_FLAGS_MINSIZEREL}>
options $<TARGET_PROPERTY:${target},COMPILE_OPTIONS>
definitions $<TARGET_PROPERTY:${target},COMPILE_DEFINITIONS>
")
  add_custom_command(
    OUTPUT ${out}/stamp-$<CONFIG>
    BYPRODUCTS ${out}/rlx_build_id.h
    COMMAND ${CMAKE_COMMAND} -DSRC_DIR=${src_dir} -DHEADER=${header} -DFLAGS=${out}/flags-$<CONFIG>.txt
            -DOUT=${out}/rlx_build_id.h -P ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/rlx_build_id.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${out}/stamp-$<CONFIG>
    DEPENDS ${srcs} ${header} ${out}/flags-$<CONFIG>.txt ${CMAKE_CURRENT_FUNCTION_LIST_DIR}/rlx_build_id.cmake
    COMMENT "librlx build identity"
    VERBATIM)
  add_custom_target(${target}_build_id DEPENDS ${out}/stamp-$<CONFIG>)
  add_dependencies(${target} ${target}_build_id)
  target_include_directories(${target} PRIVATE ${out})
endfunction()
