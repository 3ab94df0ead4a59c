#!/usr/bin/env bash
# Headless Chromium for the report's rendering tests (Debian packages chromium + chromium-driver).
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-browser: no apt-get here; install Chromium and ChromeDriver yourself, or the browser tests are skipped" >&2
    exit 0
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-browser: not root and no sudo; the browser tests will be skipped" >&2; exit 0; fi
fi
echo "install-browser: installing chromium and chromium-driver (Debian packages, once)" >&2
$SUDO apt-get update -qq >/dev/null
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
