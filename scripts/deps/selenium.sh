#!/usr/bin/env bash
# Installs the Selenium WebDriver client (PyPI `selenium`) into its own venv,
# target/compat/selenium-venv, for the console browser test
# (registry/server/tests/console.rs drives registry/server/tests/console/
# console_test.py with it). The test points Selenium at Debian's
# /usr/bin/chromedriver (scripts/deps/chromium.sh), so Selenium Manager never
# downloads a driver. Pinned to 4.38.0: later releases require a newer
# `certifi` than the package mirror CI uses offers. Idempotent: does nothing
# when the module imports.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/target/compat/selenium-venv"

if ! "$venv/bin/python" -c 'import selenium' 2>/dev/null; then
    echo "installing selenium==4.38.0 into $venv" >&2
    mkdir -p "$root/target/compat"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check selenium==4.38.0
fi
"$venv/bin/python" -c 'import selenium; print("selenium", selenium.__version__)'
