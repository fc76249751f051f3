# The layers of docs/design.md, checked on the includes: each folder's
# sources may include only the folders its layer may use (and a few named
# headers), so an upward include fails this test even where it would link.
# Run as `cmake -DROOT=<source dir> -P check_includes.cmake`.
cmake_minimum_required(VERSION 3.20)

# folder -> the folders its files may include from (a folder of compiler/
# is named with its parent). The compiler's sub-layers in their order,
# each using those before it.
set(below_compiler support ir ops target passes kernels executable)
set(allowed_support support)
set(allowed_ir support ir)
set(allowed_ops support ir ops)
set(allowed_target support ir target)
set(allowed_tokenizer support ir tokenizer)
set(allowed_passes support ir ops target passes)
set(allowed_kernels support ir kernels)
# What the compiler hands the runtime: compiled kernels as data, their costs,
# the memory plan. Below both.
set(allowed_executable support ir kernels executable)
# File formats sit above the IR; the compiler and everything above it read them.
set(allowed_formats support ir formats)
set(compiler_order frontend autodiff cache codegen artifact parallel driver)
set(before ${below_compiler} formats)
foreach(sub ${compiler_order})
  list(APPEND before compiler/${sub})
  set(allowed_compiler/${sub} ${before})
endforeach()
set(allowed_compiler/report support ir compiler/report)
# The runtime runs what the compiler made: executable/ (the kernels, their
# costs, the memory plan) and the training program (compiler/parallel);
# nothing else of the compiler.
set(allowed_runtime support ir formats ops kernels executable runtime compiler/parallel)
set(everything ${before} compiler/report tokenizer runtime)
set(allowed_debug ${everything} debug)
set(allowed_session ${everything} session)

set(folders support ir formats ops target tokenizer passes kernels executable runtime debug session
            compiler/report)
foreach(sub ${compiler_order})
  list(APPEND folders compiler/${sub})
endforeach()

set(failures "")
foreach(folder ${folders})
  file(GLOB_RECURSE sources RELATIVE ${ROOT} ${ROOT}/${folder}/*.h ${ROOT}/${folder}/*.cpp)
  foreach(source ${sources})
    file(STRINGS ${ROOT}/${source} includes REGEX "^#include \"[a-z_0-9]+/")
    foreach(line ${includes})
      string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" header "${line}")
      string(REGEX MATCH "^[a-z_0-9]+" top "${header}")
      set(layer ${top})
      if(top STREQUAL "compiler")
        string(REGEX MATCH "^compiler/[a-z_0-9]+" layer "${header}")
      endif()
      if(NOT layer IN_LIST allowed_${folder} AND NOT header IN_LIST allowed_headers_${folder})
        string(APPEND failures "  ${source}: #include \"${header}\" (${folder}/ may not use ${layer}/)\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(failures)
  message(FATAL_ERROR "includes across the layers of docs/design.md:\n${failures}")
endif()
message(STATUS "every include follows the layers of docs/design.md")
