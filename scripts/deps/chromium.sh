#!/usr/bin/env bash
# Installs headless Chromium (Debian package `chromium`) for the `reports` HTML
# rendering test (reports/tests/html_chromium.rs). Idempotent: does nothing when
# /usr/bin/chromium already exists, so CI can call it on every run.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium
/usr/bin/chromium --version
