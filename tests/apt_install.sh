# SPDX-License-Identifier: Apache-2.0
# Sourced by the scripts in tests/ that install Debian packages:
#   apt_install PKG...   installs the packages (as root), one install at a
#                        time on this machine (ctest starts fixtures in
#                        parallel: two apt-gets would fight over dpkg's lock,
#                        and one's policy-rc.d could be removed under the
#                        other's install), never starting a packaged service.
apt_install() {
  exec 9>/tmp/coord-apt-install.lock
  flock 9
  local made_policy=0
  if [ ! -e /usr/sbin/policy-rc.d ]; then  # keep packaged services (PostgreSQL on 5432, Redis on 6379) stopped
    printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d
    chmod +x /usr/sbin/policy-rc.d
    made_policy=1
  fi
  export DEBIAN_FRONTEND=noninteractive
  local rc=0
  # The package lists may be absent on a new machine: update, then try again.
  if ! apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "$@" >/dev/null; then
    apt-get -o DPkg::Lock::Timeout=600 update -q >/dev/null &&
      apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "$@" >/dev/null || rc=$?
  fi
  [ "$made_policy" = 1 ] && rm -f /usr/sbin/policy-rc.d
  flock -u 9
  exec 9>&-
  return $rc
}
