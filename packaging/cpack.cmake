# The Debian package of kvwatch (CPack DEB), included from the top-level
# CMakeLists.txt after the targets (`include(packaging/cpack.cmake)`).
#
#   cmake --build build --target package     # or: cd build && cpack -G DEB
#
# It installs, besides /usr/bin/kvwatch (agent/CMakeLists.txt):
#   /lib/systemd/system/kvwatch-agent.service   the hardened unit
#   /etc/default/kvwatch-agent                  its ARGS (conffile)
#   /etc/kvwatch/kvwatch.yml                    the agent config (conffile)
#   /usr/share/kvwatch/grafana/                 dashboard and provisioning examples
#   /usr/share/kvwatch/prometheus/              alerting and recording rules (packaging/prometheus/)
#   /usr/share/kvwatch/kubernetes/, container/  deployment examples
#   /usr/share/doc/kvwatch/README.md, docs/   the README and the docs/ it links to
# Dependencies come from dpkg-shlibdeps (dpkg-dev). The maintainer scripts in
# packaging/debian/ do what debhelper's dh_installsystemd would: enable and start
# the unit on install, restart it on upgrade, stop it on removal. The unit runs
# as a DynamicUser, so no system user is created.
#
# Absolute destinations (/etc, /lib) are what a Debian package needs; `cmake
# --install` with another prefix still writes them there, so install to a
# staging root with DESTDIR.

set(KVWATCH_PACKAGING_DIR ${CMAKE_CURRENT_LIST_DIR})
set(KVWATCH_SYSTEMD_UNIT_DIR "/lib/systemd/system" CACHE PATH "Where the systemd unit is installed (absolute)")
set(KVWATCH_PACKAGE_MAINTAINER "kvwatch maintainers <kvwatch@localhost>" CACHE STRING
    "Maintainer field of the Debian package (Name <email>)")

install(FILES ${KVWATCH_PACKAGING_DIR}/systemd/kvwatch-agent.service DESTINATION ${KVWATCH_SYSTEMD_UNIT_DIR})
install(FILES ${KVWATCH_PACKAGING_DIR}/systemd/kvwatch-agent.default DESTINATION /etc/default RENAME kvwatch-agent)
install(FILES ${KVWATCH_PACKAGING_DIR}/kvwatch.yml DESTINATION /etc/kvwatch)
install(FILES ${KVWATCH_PACKAGING_DIR}/grafana/kvwatch.json DESTINATION share/kvwatch/grafana/dashboards)
install(DIRECTORY ${KVWATCH_PACKAGING_DIR}/grafana/provisioning DESTINATION share/kvwatch/grafana)
install(DIRECTORY ${KVWATCH_PACKAGING_DIR}/kubernetes ${KVWATCH_PACKAGING_DIR}/container
        DESTINATION share/kvwatch)
# The rule files of packaging/prometheus/ are shipped, not their promtool unit
# tests (*.test.yml). The glob re-runs at build time when files are added.
file(GLOB KVWATCH_PROMETHEUS_FILES CONFIGURE_DEPENDS
     ${KVWATCH_PACKAGING_DIR}/prometheus/*.yml ${KVWATCH_PACKAGING_DIR}/prometheus/*.yaml)
list(FILTER KVWATCH_PROMETHEUS_FILES EXCLUDE REGEX "[._]test\\.ya?ml$")
if(KVWATCH_PROMETHEUS_FILES)
  install(FILES ${KVWATCH_PROMETHEUS_FILES} DESTINATION share/kvwatch/prometheus)
endif()
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION share/doc/kvwatch)
# docs/ beside the README (not flattened into it), so the README's relative links
# docs/*.md resolve in the installed copy too.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs DESTINATION share/doc/kvwatch)

find_program(KVWATCH_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(NOT KVWATCH_DPKG_SHLIBDEPS)
  message(WARNING "dpkg-shlibdeps (Debian package dpkg-dev) not found: the .deb will have no Depends")
endif()

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "kvwatch")
set(CPACK_PACKAGE_VERSION "${PROJECT_VERSION}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "LLM KV-cache working-set agent for Prometheus")
set(CPACK_PACKAGE_DESCRIPTION
    "kvwatch measures the working set of an LLM serving replica's prefix (KV) cache: it runs
Mattson's LRU stack-distance algorithm over the replica's page references and turns them,
in one pass, into the capacity-to-hit-rate curve, with the knee and the capacity needed
for a target hit rate. The agent serves the curves to Prometheus; a Grafana dashboard,
Prometheus rules and a hardened systemd unit are included.")
set(CPACK_PACKAGE_CONTACT "${KVWATCH_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "prometheus, prometheus-alertmanager")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
# conffiles: files under /etc that dpkg keeps when the admin edited them.
file(WRITE ${CMAKE_BINARY_DIR}/packaging/debian/conffiles "/etc/default/kvwatch-agent\n/etc/kvwatch/kvwatch.yml\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${CMAKE_BINARY_DIR}/packaging/debian/conffiles
    ${KVWATCH_PACKAGING_DIR}/debian/postinst
    ${KVWATCH_PACKAGING_DIR}/debian/prerm
    ${KVWATCH_PACKAGING_DIR}/debian/postrm)
# Everything the package would pick up from a build tree's own install rules
# (there are none besides the binary) goes in the one package.
set(CPACK_DEB_COMPONENT_INSTALL OFF)
set(CPACK_SOURCE_GENERATOR "")
include(CPack)
