# Project-include hook (-DCMAKE_PROJECT_INCLUDE=...): the ROS 2 PyPI wheels' exported CMake
# targets carry include directories of the machine that built them (its Python headers and
# its site-packages, e.g. /opt/python/cp311-cp311/include/python3.11). At the end of the
# configure step, every imported target's missing directory of that kind is pointed at the
# same directory of this interpreter (PYTHON_EXECUTABLE).
execute_process(
  COMMAND "${PYTHON_EXECUTABLE}" -c
    "import sysconfig; p = sysconfig.get_paths(); print(p['include'] + ';' + p['purelib'])"
  OUTPUT_VARIABLE _simops_python_paths OUTPUT_STRIP_TRAILING_WHITESPACE
  COMMAND_ERROR_IS_FATAL ANY)
list(GET _simops_python_paths 0 _simops_python_include)
list(GET _simops_python_paths 1 _simops_site_packages)

function(_simops_fix_wheel_includes)
  get_property(targets DIRECTORY "${CMAKE_SOURCE_DIR}" PROPERTY IMPORTED_TARGETS)
  foreach(target IN LISTS targets)
    get_target_property(dirs ${target} INTERFACE_INCLUDE_DIRECTORIES)
    if(NOT dirs)
      continue()
    endif()
    set(fixed "")
    foreach(dir IN LISTS dirs)
      if(NOT EXISTS "${dir}")
        if(dir MATCHES "/include/python3\\.[0-9]+$")
          set(dir "${_simops_python_include}")
        elseif(dir MATCHES "/lib/python3\\.[0-9]+/site-packages/(.*)$")
          set(dir "${_simops_site_packages}/${CMAKE_MATCH_1}")
        endif()
      endif()
      list(APPEND fixed "${dir}")
    endforeach()
    set_target_properties(${target} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${fixed}")
  endforeach()
endfunction()

cmake_language(DEFER DIRECTORY "${CMAKE_SOURCE_DIR}" CALL _simops_fix_wheel_includes)
