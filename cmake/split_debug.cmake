# Run at install time (install(SCRIPT)): the installed binary keeps no debug info; it goes apart, as
# Debian's -dbgsym packages do, to PREFIX/lib/debug/.build-id/NN/REST.debug, where gdb finds it by
# the binary's build id (and, through the debug link, next to it under lib/debug/). Needs objcopy
# and readelf (binutils).
set(prefix "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}")
set(bin "${prefix}/bin/rewardctl")
find_program(OBJCOPY objcopy REQUIRED)
find_program(READELF readelf REQUIRED)
execute_process(COMMAND ${READELF} -n ${bin} OUTPUT_VARIABLE notes COMMAND_ERROR_IS_FATAL ANY)
string(REGEX MATCH "Build ID: ([0-9a-f]+)" _ "${notes}")
set(id "${CMAKE_MATCH_1}")
if(id STREQUAL "")
  message(FATAL_ERROR "split_debug: ${bin} has no build id: cannot place its debug info")
endif()
string(SUBSTRING "${id}" 0 2 dir)
string(SUBSTRING "${id}" 2 -1 rest)
set(debug "${prefix}/lib/debug/.build-id/${dir}/${rest}.debug")
file(MAKE_DIRECTORY "${prefix}/lib/debug/.build-id/${dir}")
execute_process(COMMAND ${OBJCOPY} --only-keep-debug --compress-debug-sections ${bin} ${debug} COMMAND_ERROR_IS_FATAL ANY)
execute_process(COMMAND ${OBJCOPY} --strip-debug --strip-unneeded --add-gnu-debuglink=${debug} ${bin}
                COMMAND_ERROR_IS_FATAL ANY)
message(STATUS "Stripped: ${bin} (debug info in ${debug})")
