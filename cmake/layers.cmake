# The layers of src/hourglass/, lowest first (docs/ARCHITECTURE.md, "Layers"). A layer may
# include its own headers and those of the layers before it, never those of a layer after it.
# scripts/hip-check.sh reads this list too: keep it on one line.
set(HOURGLASS_LAYERS base device tensor ops backend autograd nn optim data obs train)

# hourglass_layer_include_root(<layer> <var>): sets <var> to the include root of <layer>, a
# folder of the build tree holding hourglass/<lower> -> src/hourglass/<lower> symbolic links for
# that layer and every layer before it, and nothing else. A layer's target (and everything
# built "inside" it, such as the layering probes) has only this root (and the lower layers'
# roots, which are subsets of it) for hourglass headers, so '#include "hourglass/<higher>/x.h"'
# fails to compile with "No such file or directory". src/ itself is on no include path.
function(hourglass_layer_include_root layer var)
  list(FIND HOURGLASS_LAYERS ${layer} index)
  if(index LESS 0)
    message(FATAL_ERROR "hourglass: '${layer}' is not a layer (${HOURGLASS_LAYERS})")
  endif()
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  file(MAKE_DIRECTORY ${root}/hourglass)
  # Links of layers no longer below this one (the order changed) are removed; existing links
  # are kept as they are, so a reconfigure touches nothing and rebuilds nothing.
  file(GLOB present RELATIVE ${root}/hourglass ${root}/hourglass/*)
  list(SUBLIST HOURGLASS_LAYERS 0 ${index} allowed)
  list(APPEND allowed ${layer})
  foreach(name ${present})
    if(NOT name IN_LIST allowed)
      file(REMOVE ${root}/hourglass/${name})
    endif()
  endforeach()
  foreach(name ${allowed})
    set(target ${PROJECT_SOURCE_DIR}/src/hourglass/${name})
    set(link ${root}/hourglass/${name})
    if(IS_SYMLINK ${link})
      file(READ_SYMLINK ${link} current)
      if(current STREQUAL target)
        continue()
      endif()
      file(REMOVE ${link})
    endif()
    file(CREATE_LINK ${target} ${link} SYMBOLIC)
  endforeach()
  set(${var} ${root} PARENT_SCOPE)
endfunction()
