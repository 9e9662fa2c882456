#!/usr/bin/env bash
# Installs everything the test suite needs: kafkapy itself with its [test] extras (pip) and the
# system tools listed in scripts/test-apt-packages.txt (apt). Idempotent and quick when all is
# already there. Needs root (or passwordless sudo) only when an apt package is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"

# --- Python packages -----------------------------------------------------------------------
# Reinstall only when pyproject.toml changed or kafkapy does not resolve to this checkout.
stamp="build/.test-deps-stamp"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $("$PYTHON" -c 'import sys; print(sys.executable)')"
here="$(pwd -P)/kafkapy"
# Run from outside the checkout so a bare `import kafkapy` cannot find it through the cwd.
installed_at="$(cd / && "$PYTHON" -c 'import os, kafkapy; print(os.path.realpath(os.path.dirname(kafkapy.__file__)))' 2>/dev/null || true)"
if [[ "$(cat "$stamp" 2>/dev/null || true)" == "$want" && "$installed_at" == "$here" ]]; then
    echo "install-test-deps: python packages up to date"
else
    echo "install-test-deps: pip install -e '.[test]'"
    "$PYTHON" -m pip install --quiet --disable-pip-version-check --root-user-action=ignore -e '.[test]'
    mkdir -p build
    echo "$want" > "$stamp"
fi

# --- System packages -----------------------------------------------------------------------
missing=()
while read -r cmd pkg _; do
    [[ -z "${cmd:-}" || "$cmd" == \#* ]] && continue
    command -v "$cmd" >/dev/null 2>&1 || missing+=("$pkg")
done < scripts/test-apt-packages.txt

if (( ${#missing[@]} == 0 )); then
    echo "install-test-deps: system packages present"
    exit 0
fi

if [[ "$(id -u)" == 0 ]]; then
    SUDO=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    SUDO=(sudo -n)
else
    echo "!!! install-test-deps: missing ${missing[*]} and no root/sudo to apt-get install them;" \
         "the tests that need them will be SKIPPED" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "!!! install-test-deps: missing ${missing[*]} and no apt-get; the tests that need them will be SKIPPED" >&2
    exit 0
fi
echo "install-test-deps: apt-get install ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
if ! { "${SUDO[@]}" apt-get update -qq && \
       "${SUDO[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; }; then
    echo "!!! install-test-deps: apt-get install ${missing[*]} failed; the tests that need them will be SKIPPED" >&2
fi
