#!/usr/bin/env bash
# Runs the WHOLE kafkapy test suite from a fresh clone: installs what it needs, then pytest
# over tests/, conformance/ and spark-integration/ (see [tool.pytest.ini_options]).
#
#   bash scripts/test.sh                      # everything
#   bash scripts/test.sh conformance -k kcat  # extra arguments go to pytest
#
# KAFKAPY_TEST_BOOTSTRAP=host:port runs the conformance tests against an already running broker.
# KAFKAPY_SUITE_TIMEOUT_S (default 2400) bounds the whole pytest run.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! bash scripts/install-test-deps.sh; then
    echo "!!! scripts/test.sh: installing the test dependencies failed" >&2
    exit 1
fi
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"

# Per-test default timeout (modules may set their own with pytest.mark.timeout), slowest tests listed.
timeout --signal=TERM --kill-after=60 "${KAFKAPY_SUITE_TIMEOUT_S:-2400}" \
    "$PYTHON" -m pytest --timeout=300 --durations=25 "$@"
rc=$?

case $rc in
    5)
        if [[ "${KAFKAPY_ALLOW_NO_TESTS:-0}" == 1 ]]; then
            echo "scripts/test.sh: pytest collected no tests (allowed: KAFKAPY_ALLOW_NO_TESTS=1)"
            exit 0
        fi
        echo "!!! scripts/test.sh: pytest collected no tests; the suite is broken" \
             "(set KAFKAPY_ALLOW_NO_TESTS=1 when a filter is meant to select nothing)" >&2
        ;;
    124|137)
        echo "!!! scripts/test.sh: the test run exceeded ${KAFKAPY_SUITE_TIMEOUT_S:-2400} s and was stopped" >&2
        ;;
esac
exit $rc
