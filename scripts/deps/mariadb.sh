#!/usr/bin/env bash
# Installs the MariaDB server (Debian package `mariadb-server`) the MySQL
# health checker's test starts on loopback with its own data directory
# (registry/server/tests/health_mysql.rs). No system service is started
# or enabled here: the test runs `mariadbd` itself and stops it. Idempotent:
# does nothing when `mariadbd` and `mariadb-install-db` are present, so CI
# can call it on every run.
set -euo pipefail

have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ]; }

if ! have mariadbd || ! have mariadb-install-db; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    # The package's maintainer scripts would start a server on port 3306:
    # policy-rc.d tells invoke-rc.d not to, for the length of this install.
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' | $SUDO tee "$policy" >/dev/null
        $SUDO chmod +x "$policy"
        trap '$SUDO rm -f "$policy"' EXIT
    fi
    $SUDO apt-get update
    $SUDO apt-get install -y --no-install-recommends mariadb-server
fi
PATH="$PATH:/usr/sbin" mariadbd --version
