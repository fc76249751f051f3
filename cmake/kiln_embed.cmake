# kiln_embed_files(OUT_VAR GLOB <pattern> HEADER <h> NS <namespace> FUNC <name>)
# Generates a source file embedding every file matching GLOB (relative to the
# repository root) and stores its path in OUT_VAR for add_library().
function(kiln_embed_files out_var)
  cmake_parse_arguments(ARG "" "GLOB;HEADER;NS;FUNC" "" ${ARGN})
  file(GLOB files RELATIVE ${CMAKE_SOURCE_DIR} CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${ARG_GLOB})
  list(SORT files)
  list(TRANSFORM files PREPEND ${CMAKE_SOURCE_DIR}/ OUTPUT_VARIABLE paths)
  string(REPLACE ";" "," file_list "${files}")
  set(output ${CMAKE_CURRENT_BINARY_DIR}/${ARG_FUNC}.cpp)
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DROOT=${CMAKE_SOURCE_DIR} -DFILES=${file_list}
            -DOUTPUT=${output} -DHEADER=${ARG_HEADER} -DNS=${ARG_NS} -DFUNC=${ARG_FUNC}
            -P ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake
    DEPENDS ${CMAKE_SOURCE_DIR}/cmake/embed_files.cmake ${paths}
    COMMENT "Embedding ${ARG_GLOB}")
  set(${out_var} ${output} PARENT_SCOPE)
endfunction()
