#!/usr/bin/env bash
# Runs the WHOLE kafkapy test suite from a fresh clone: installs what it needs, checks the layers
# (lint-imports) and that no import cycle exists (scripts/check_import_cycles.py), then pytest over
# tests/, conformance/ and spark-integration/ (see [tool.pytest.ini_options]).
#
#   bash scripts/test.sh                      # everything
#   bash scripts/test.sh conformance -k kcat  # extra arguments go to pytest
#
# KAFKAPY_TEST_BOOTSTRAP=host:port runs the conformance tests against an already running broker.
# KAFKAPY_SUITE_TIMEOUT_S (default 3600) bounds the whole pytest run.
set -uo pipefail
cd "$(dirname "$0")/.."

if ! bash scripts/install-test-deps.sh; then
    echo "!!! scripts/test.sh: installing the test dependencies failed" >&2
    exit 1
fi
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"

# In CI the client matrix must run, not skip: a missing JDK, Maven, jar or pyspark fails the test
# (conformance/matrix, conformance/kafka_apps, conformance/differential, spark-integration).
if [[ "${CI:-}" == true || "${CI:-}" == 1 ]]; then
    export KAFKAPY_REQUIRE_JAVA="${KAFKAPY_REQUIRE_JAVA:-1}" KAFKAPY_REQUIRE_SPARK="${KAFKAPY_REQUIRE_SPARK:-1}"
fi
# pyspark 4.0 and 3.5 in their own venvs, their Kafka connectors from Maven (quick when present; the
# Spark fixtures would do it on first use, inside a test's timeout)
if (( $# == 0 )) && ! bash scripts/install-spark.sh && [[ "${KAFKAPY_REQUIRE_SPARK:-0}" == 1 ]]; then
    echo "!!! scripts/test.sh: installing pyspark and Spark's Kafka connector failed" >&2
    exit 1
fi

# The layers (pyproject.toml [tool.importlinter]) before any test: an import across them fails the
# run. lint-imports reads this checkout (the repo root first on the path), not an installed copy.
LINT_IMPORTS="$(dirname "$PYTHON")/lint-imports"
[[ -x "$LINT_IMPORTS" ]] || LINT_IMPORTS=lint-imports
if ! PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" "$LINT_IMPORTS" --no-cache; then
    echo "!!! scripts/test.sh: lint-imports: an import crosses the layers of pyproject.toml [tool.importlinter]" >&2
    exit 1
fi

# No import cycle of any kind (function-level and TYPE_CHECKING imports included), which
# lint-imports cannot see: scripts/check_import_cycles.py prints each cycle it finds.
if ! "$PYTHON" scripts/check_import_cycles.py; then
    echo "!!! scripts/test.sh: import cycle: kafkapy's modules import each other (scripts/check_import_cycles.py)" >&2
    exit 1
fi

# Per-test default timeout (modules may set their own with pytest.mark.timeout), slowest tests listed.
timeout --signal=TERM --kill-after=60 "${KAFKAPY_SUITE_TIMEOUT_S:-3600}" \
    "$PYTHON" -m pytest --timeout=300 --durations=25 "$@"
rc=$?

# storage="memory" (kafkapy/testing/storage.py) keeps a broker's logs on a memory file system; the
# log's unit and property tests and the client conformance tests below run once more with every
# temporary directory (and so every broker's log.dirs) there. Only on a whole-suite run.
if (( $# == 0 )) && [[ "${KAFKAPY_MEMORY_PASS:-1}" == 1 ]]; then
    if mem_root="$("$PYTHON" -m kafkapy.testing.storage 2>/dev/null)"; then
        mem_base="$(mktemp -d "$mem_root/kafkapy-memory-pass-XXXXXX")"
        echo "scripts/test.sh: the log and client conformance tests again on memory storage ($mem_base)"
        TMPDIR="$mem_base" timeout --signal=TERM --kill-after=60 "${KAFKAPY_MEMORY_PASS_TIMEOUT_S:-900}" \
            "$PYTHON" -m pytest --timeout=300 -p no:cacheprovider --basetemp="$mem_base/pytest" \
            tests/log conformance/test_confluent_kafka.py conformance/test_kcat.py \
            conformance/test_groups.py conformance/test_transactions.py conformance/test_bad_input.py
        mem_rc=$?
        rm -rf "$mem_base"
        (( rc == 0 )) && rc=$mem_rc
    else
        echo "!!! scripts/test.sh: no memory file system here; the memory-storage pass is SKIPPED" >&2
    fi
fi

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
        echo "!!! scripts/test.sh: the test run exceeded ${KAFKAPY_SUITE_TIMEOUT_S:-3600} s and was stopped" >&2
        ;;
esac
exit $rc
