# Runs at install time, when CMAKE_INSTALL_PREFIX is the prefix really used,
# so that fenceq.pc names the folders the client was installed in.
string(RANDOM LENGTH 12 tag)  # installs may run at once (cpack next to cmake --install)
set(staged "${FENCEQ_PC_DIR}/installing-${tag}/fenceq.pc")
configure_file("${FENCEQ_PC_IN}" "${staged}" @ONLY)
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${FENCEQ_LIBDIR}/pkgconfig" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${staged}")
file(REMOVE_RECURSE "${FENCEQ_PC_DIR}/installing-${tag}")
