#!/usr/bin/env bash
# Installs headless Chromium and its WebDriver server (Debian packages
# `chromium` and `chromium-driver`) for the tests that drive a real browser:
# the `reports` HTML rendering test (reports/tests/html_chromium.rs) and the
# console test (registry/server/tests/console.rs). Idempotent: does nothing
# when both binaries exist, so CI can call it on every run.
set -euo pipefail

if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    echo "chromium already installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
    echo "chromedriver already installed: $(/usr/bin/chromedriver --version 2>/dev/null || echo unknown version)"
    exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
    SUDO="sudo"
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update
$SUDO apt-get install -y chromium chromium-driver
/usr/bin/chromium --version
/usr/bin/chromedriver --version
