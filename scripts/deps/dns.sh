#!/usr/bin/env bash
# Installs the real DNS clients the DNS door's tests drive
# (registry/server/tests/dns.rs): `dig` (Debian package `bind9-dnsutils`)
# and dnspython==2.7.0 into target/compat/venv-dns. Idempotent: does nothing
# when both are present, so CI can call it on every run.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
compat="$root/target/compat"
mkdir -p "$compat"

if ! command -v dig >/dev/null 2>&1; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        SUDO="sudo"
    fi
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update
    $SUDO apt-get install -y bind9-dnsutils
fi
dig -v 2>&1 | head -1

if ! "$compat/venv-dns/bin/python" -c 'import dns.resolver' 2>/dev/null; then
    echo "installing dnspython==2.7.0 into $compat/venv-dns" >&2
    python3 -m venv "$compat/venv-dns"
    "$compat/venv-dns/bin/pip" install --quiet --disable-pip-version-check dnspython==2.7.0
fi
