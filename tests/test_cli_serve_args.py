"""`kafkapy serve`'s plain command lines are parsed without argparse (start-up time, issue 21):
whatever `_plain_serve_args` accepts, it must read exactly as the argparse parser does, and it must
hand everything else to argparse."""
from __future__ import annotations

import subprocess
import sys

import pytest

from kafkapy.cli import _parser, _plain_serve_args

PLAIN = [
    ["serve"],
    ["serve", "server.properties"],
    ["serve", "--config", "a.properties"],
    ["serve", "-c", "a.properties"],
    ["serve", "--config=a.properties", "--override", "num.partitions=3"],
    ["serve", "--override", "listeners=PLAINTEXT://127.0.0.1:9092", "--override=log.dirs=/tmp/x",
     "--override", "a=b=c", "--override="],
    ["serve", "--ephemeral", "--port", "19092", "--storage", "memory", "--control"],
    ["serve", "--ephemeral", "--port=0", "--storage=disk"],
    ["--log-level", "debug", "serve", "--ephemeral"],
    ["serve", "--log-level", "WARNING", "cfg.properties", "--override", "x=1"],
    ["--log-level=error", "serve", "--log-level", "info"],
]

NOT_PLAIN = [
    ["serve", "--help"],
    ["serve", "-h"],
    ["--version"],
    ["serve", "--over", "a=b"],          # an abbreviation: argparse's rules
    ["serve", "--port", "-1"],
    ["serve", "--port", "x"],
    ["serve", "--storage", "tape"],
    ["serve", "--log-level", "LOUD"],
    ["serve", "a.properties", "b.properties"],
    ["serve", "--override"],
    ["serve", "--override", "--ephemeral"],
    ["serve", "-cfile"],
    ["serve", "--ephemeral=yes"],
    ["--ephemeral", "serve"],
    ["serve", "--"],
    ["cluster"],
]


def _via_argparse(argv: list[str]) -> dict:
    values = vars(_parser(with_admin=False, only_serve=True).parse_args(argv))
    return values


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_plain_lines_read_as_argparse_reads_them(argv):
    plain = _plain_serve_args(argv)
    assert plain is not None
    assert vars(plain) == _via_argparse(argv)


@pytest.mark.parametrize("argv", NOT_PLAIN, ids=" ".join)
def test_everything_else_goes_to_argparse(argv):
    assert _plain_serve_args(argv) is None


def test_serve_does_not_import_argparse():
    code = ("import sys, kafkapy.cli as c; a = c._plain_serve_args(['serve', '--override', 'x=1']); "
            "print(a.override, 'argparse' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["['x=1']", "False"], done.stderr


def test_start_up_collects_no_garbage_until_serving():
    # in a child: gc state is process-wide
    code = ("import gc, kafkapy.cli as c; before = gc.get_threshold(); saved = c._pause_gc(); "
            "during = gc.get_threshold()[0]; c._resume_gc(saved); "
            "print(saved == before, during, gc.get_threshold() == before, gc.get_freeze_count() > 0, gc.isenabled())")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert done.stdout.split() == ["True", "200000", "True", "True", "True"], done.stderr


def test_main_called_in_process_leaves_the_collector_alone(monkeypatch):
    import gc

    import kafkapy.cli as cli

    seen = []
    monkeypatch.setattr(cli, "_serve", lambda args, gc_paused=None: seen.append(gc_paused) or 0)
    before = gc.get_threshold()
    assert cli.main(["serve", "--ephemeral"]) == 0
    assert seen == [None] and gc.get_threshold() == before
