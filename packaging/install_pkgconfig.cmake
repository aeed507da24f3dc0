# Runs at install time, when CMAKE_INSTALL_PREFIX is the prefix really used,
# so that fenceq.pc names the folders the client was installed in.
configure_file("${FENCEQ_PC_IN}" "${FENCEQ_PC_OUT}" @ONLY)
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/${FENCEQ_LIBDIR}/pkgconfig" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${FENCEQ_PC_OUT}")
