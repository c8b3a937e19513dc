# The layers of src/hourglass/ and what each one uses (docs/ARCHITECTURE.md, "Layers"): a layer
# may include its own headers and those of the layers it uses, directly or through another
# layer, never those of any other layer. HOURGLASS_LAYERS lists them so that each comes after the
# layers it uses (the order the build makes them in). scripts/hip-check.sh reads these lines
# too: keep each on one line.
set(HOURGLASS_LAYERS base device dist tensor ops backend autograd nn optim data obs infer train rl)
set(HOURGLASS_LAYER_USES_base "")
set(HOURGLASS_LAYER_USES_device base)
set(HOURGLASS_LAYER_USES_dist device)
set(HOURGLASS_LAYER_USES_tensor device)
set(HOURGLASS_LAYER_USES_ops tensor)
set(HOURGLASS_LAYER_USES_backend ops)
set(HOURGLASS_LAYER_USES_autograd ops dist)
set(HOURGLASS_LAYER_USES_nn autograd)
set(HOURGLASS_LAYER_USES_optim nn)
set(HOURGLASS_LAYER_USES_data ops)
set(HOURGLASS_LAYER_USES_obs ops)
set(HOURGLASS_LAYER_USES_infer ops)
set(HOURGLASS_LAYER_USES_train optim data obs)
set(HOURGLASS_LAYER_USES_rl train)

# hourglass_layer_reach(<layer> <var>): sets <var> to <layer> and every layer it uses, directly
# or through another, in the order of HOURGLASS_LAYERS. A layer that uses one listed after it,
# or one that is not a layer, stops the configuration.
function(hourglass_layer_reach layer var)
  list(FIND HOURGLASS_LAYERS ${layer} index)
  if(index LESS 0)
    message(FATAL_ERROR "hourglass: '${layer}' is not a layer (${HOURGLASS_LAYERS})")
  endif()
  set(reach ${layer})
  set(todo ${layer})
  while(todo)
    list(POP_FRONT todo current)
    list(FIND HOURGLASS_LAYERS ${current} current_index)
    foreach(used ${HOURGLASS_LAYER_USES_${current}})
      list(FIND HOURGLASS_LAYERS ${used} used_index)
      if(used_index LESS 0 OR NOT used_index LESS current_index)
        message(FATAL_ERROR "hourglass: layer '${current}' uses '${used}', which is not a layer "
                            "listed before it in HOURGLASS_LAYERS (cmake/layers.cmake)")
      endif()
      if(NOT used IN_LIST reach)
        list(APPEND reach ${used})
        list(APPEND todo ${used})
      endif()
    endforeach()
  endwhile()
  set(ordered "")
  foreach(name ${HOURGLASS_LAYERS})
    if(name IN_LIST reach)
      list(APPEND ordered ${name})
    endif()
  endforeach()
  set(${var} ${ordered} PARENT_SCOPE)
endfunction()

# hourglass_layer_include_root(<layer> <var>): sets <var> to the include root of <layer>, a
# folder of the build tree holding hourglass/<name> -> src/hourglass/<name> symbolic links for
# that layer and every layer in its reach (hourglass_layer_reach), and nothing else. A layer's
# target (and everything built "inside" it, such as the layering probes) has only this root
# (and the roots of the layers it uses, which are subsets of it) for hourglass headers, so
# '#include "hourglass/<other>/x.h"' of a layer out of its reach fails to compile with "No such
# file or directory". src/ itself is on no include path.
function(hourglass_layer_include_root layer var)
  hourglass_layer_reach(${layer} allowed)
  set(root ${PROJECT_BINARY_DIR}/layers/${layer})
  file(MAKE_DIRECTORY ${root}/hourglass)
  # Links of layers no longer in reach (the graph changed) are removed; existing links are kept
  # as they are, so a reconfigure touches nothing and rebuilds nothing.
  file(GLOB present RELATIVE ${root}/hourglass ${root}/hourglass/*)
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
