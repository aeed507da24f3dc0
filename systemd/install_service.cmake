# Runs at install time (cmake --install, cpack), when CMAKE_INSTALL_PREFIX is
# the prefix really used: installs the unit with its paths under that prefix
# and the example config in the matching etc folder. file(INSTALL) honours
# DESTDIR and records the files in the install manifest.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr")
  set(fenceq_etc "/etc")  # FHS: /usr has its configuration in /etc
else()
  set(fenceq_etc "${CMAKE_INSTALL_PREFIX}/etc")
endif()

file(READ "${FENCEQ_SYSTEMD_SOURCE_DIR}/fenceqd.service" unit)
string(REPLACE "/usr/bin/" "${CMAKE_INSTALL_PREFIX}/bin/" unit "${unit}")
string(REPLACE "/usr/share/doc/" "${CMAKE_INSTALL_PREFIX}/share/doc/" unit "${unit}")
string(REPLACE "/etc/fenceq/" "${fenceq_etc}/fenceq/" unit "${unit}")
# A name of its own: installs may run at once (cpack next to cmake --install).
string(RANDOM LENGTH 12 tag)
set(staged "${FENCEQ_SYSTEMD_BINARY_DIR}/installing-${tag}/fenceqd.service")
file(WRITE "${staged}" "${unit}")
file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ FILES "${staged}")
file(REMOVE_RECURSE "${FENCEQ_SYSTEMD_BINARY_DIR}/installing-${tag}")

# An administrator's edited config is never overwritten by a plain install
# (the Debian package marks it as a conffile instead: dpkg asks).
if(EXISTS "$ENV{DESTDIR}${fenceq_etc}/fenceq/fenceqd.conf")
  message(STATUS "Kept: $ENV{DESTDIR}${fenceq_etc}/fenceq/fenceqd.conf")
else()
  file(INSTALL DESTINATION "${fenceq_etc}/fenceq" TYPE FILE
    PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
    FILES "${FENCEQ_SYSTEMD_SOURCE_DIR}/fenceqd.conf")
endif()
