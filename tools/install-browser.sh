#!/usr/bin/env bash
# Headless Chromium for the report's rendering tests (Debian packages chromium + chromium-driver).
# When it cannot install them it says so and exits 0, so `make test` still runs everything else;
# the browser tests then fail there (make test sets DRAFTBENCH_REQUIRE_BROWSER=1) and are skipped
# by a plain `pytest`.
set -euo pipefail
case "$#:${1:-}" in     # no arguments; --help: the comment above
0:) ;;
*:-h | *:--help) echo "usage: bash tools/install-browser.sh   (no arguments)"; sed -n '2,/^set -euo/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0;;
*) echo "install-browser: unknown argument '$1': it takes none (bash $0 --help says what it does)" >&2
   exit 2;;
esac
have_browser() { command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; }
cannot_install() {
    echo "install-browser: $1; install Chromium and ChromeDriver yourself (\`chromium\` and \`chromedriver\`" \
         "on PATH). Until then \`make test\` fails its browser tests (it sets DRAFTBENCH_REQUIRE_BROWSER=1);" \
         "a plain \`pytest\` skips them." >&2
    exit 0
}
if have_browser; then
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    cannot_install "no apt-get here"
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else cannot_install "not root and no sudo"; fi
fi
echo "install-browser: installing chromium and chromium-driver (Debian packages, once)" >&2
if ! { $SUDO apt-get update -qq >/dev/null &&
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends \
            chromium chromium-driver >/dev/null; }; then
    cannot_install "apt-get could not install chromium and chromium-driver (its error is above)"
fi
if ! have_browser; then
    cannot_install "apt-get installed chromium and chromium-driver, but they are still not on PATH"
fi
