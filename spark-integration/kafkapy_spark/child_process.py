"""Drive Spark in a child process (child_driver.py) run by a pyspark venv's python.

The test process keeps its own environment (no pyspark needed); the child holds one SparkSession
and answers one JSON request at a time. Every call is bounded in time, and close() (or leaving the
`with` block) stops the child and its JVM, which run in their own process group.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import threading
from pathlib import Path
from typing import Any, Sequence

SPARK_INTEGRATION_DIR = Path(__file__).resolve().parents[1]


class SparkChildError(RuntimeError):
    """An operation failed in the child (the message holds the child's error), or the child died."""


class SparkChild:
    """A running child Spark driver; `call(op, **args)` runs child_ops.<op>(spark, **args) there."""

    def __init__(self, python: Path, jars: Sequence[Path], log_path: Path, master: str = "local[2]",
                 start_timeout_s: float = 180.0) -> None:
        self.log_path = log_path
        self.spark_version = ""
        env = {key: value for key, value in os.environ.items()
               if key not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "SPARK_HOME", "PYSPARK_DRIVER_PYTHON")}
        env.update(PYTHONPATH=str(SPARK_INTEGRATION_DIR), PYSPARK_PYTHON=str(python), PYTHONUNBUFFERED="1",
                   SPARK_LOCAL_IP="127.0.0.1")
        self._log = open(log_path, "w")
        self._process = subprocess.Popen(
            [str(python), "-m", "kafkapy_spark.child_driver", "--master", master,
             "--jars", os.pathsep.join(str(jar) for jar in jars)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, text=True, env=env,
            cwd=str(SPARK_INTEGRATION_DIR), start_new_session=True,
        )
        self._answers: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._read_answers, name="spark-child-reader", daemon=True).start()
        try:
            self.spark_version = self._answer(start_timeout_s, "start")["ready"]
        except BaseException:
            self.close()
            raise

    def _read_answers(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._answers.put(line)
        self._answers.put(None)

    def _answer(self, timeout_s: float, what: str) -> dict[str, Any]:
        try:
            line = self._answers.get(timeout=timeout_s)
        except queue.Empty:
            raise SparkChildError(f"the Spark child gave no answer to {what} within {timeout_s:.0f} s; "
                                  f"log {self.log_path}:\n{self.log_tail()}") from None
        if line is None:
            raise SparkChildError(f"the Spark child exited during {what} (status {self._process.poll()}); "
                                  f"log {self.log_path}:\n{self.log_tail()}")
        answer = json.loads(line)
        if "error" in answer:
            errors = self.log_errors()
            raise SparkChildError(f"{what}: {answer['error']}\n{answer.get('traceback', '')}"
                                  + (f"\nERROR lines of the driver log {self.log_path}:\n{errors}" if errors else ""))
        return answer

    def call(self, op: str, timeout_s: float = 150.0, **args: Any) -> Any:
        """Run child_ops.<op>(spark, **args) in the child and return its result."""
        assert self._process.stdin is not None
        self._process.stdin.write(json.dumps({"op": op, "args": args}) + "\n")
        self._process.stdin.flush()
        return self._answer(timeout_s, op)["result"]

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def log_errors(self, limit: int = 10) -> str:
        """The driver log's ERROR lines, each with the line after it (often the cause, e.g. a client's)."""
        try:
            lines = self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return ""
        picked = [f"{line}\n  {lines[n + 1] if n + 1 < len(lines) else ''}"
                  for n, line in enumerate(lines) if " ERROR " in line]
        return "\n".join(picked[-limit:])

    def close(self, timeout_s: float = 30.0) -> None:
        """Ask the child to stop Spark and exit; kill its process group if it does not in time."""
        try:
            if self._process.poll() is None and self._process.stdin is not None:
                self._process.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self._process.stdin.close()
            self._process.wait(timeout_s)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            pass
        finally:
            try:
                os.killpg(self._process.pid, signal.SIGKILL)  # the JVM too, if it outlived the child
            except ProcessLookupError:
                pass
            self._process.wait(10)
            self._log.close()

    def __enter__(self) -> SparkChild:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
