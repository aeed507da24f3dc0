# Run by CPack (CPACK_INSTALL_SCRIPTS), not by `cmake --install`: the .deb's
# /usr/share/doc/<package>/changelog.Debian.gz, which Debian policy (12.7)
# requires of every binary package and lintian reports missing as an error.
# One entry, for the version being packaged, so it always matches the
# control file's Version; the project's changes are in its git history.
# CPack runs this with CMAKE_INSTALL_PREFIX /usr and DESTDIR its staging
# folder, which file(INSTALL) prepends to the destination.
if(NOT CPACK_GENERATOR STREQUAL "DEB")
  return()
endif()
set(version "${CPACK_PACKAGE_VERSION}")
if(CPACK_DEBIAN_PACKAGE_RELEASE)
  string(APPEND version "-${CPACK_DEBIAN_PACKAGE_RELEASE}")
endif()
if(CPACK_DEBIAN_PACKAGE_MAINTAINER)
  set(maintainer "${CPACK_DEBIAN_PACKAGE_MAINTAINER}")
else()
  set(maintainer "${CPACK_PACKAGE_CONTACT}")
endif()
# RFC 5322 date, in UTC; SOURCE_DATE_EPOCH (reproducible builds) fixes it.
string(TIMESTAMP date "%a, %d %b %Y %H:%M:%S +0000" UTC)
set(dir "${CPACK_TOPLEVEL_DIRECTORY}/changelog")
file(MAKE_DIRECTORY "${dir}")
file(WRITE "${dir}/changelog.Debian"
"${CPACK_PACKAGE_NAME} (${version}) unstable; urgency=medium

  * Built by CPack from the fenceq sources (packaging/CMakeLists.txt).
    The changes are in the project's git history.

 -- ${maintainer}  ${date}
")
# gzip -9n: maximum compression and no name or time stamp in the header, as
# Debian's dh_compress does.
execute_process(COMMAND gzip -9nf "${dir}/changelog.Debian" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "gzip -9n changelog.Debian: ${rc}")
endif()
file(INSTALL "${dir}/changelog.Debian.gz"
  DESTINATION "${CMAKE_INSTALL_PREFIX}/share/doc/${CPACK_PACKAGE_NAME}"
  PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
