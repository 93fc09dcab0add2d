"""Bad input at the edges of the command line: output paths, Redis URLs, SLOs, exit codes.

Every case is refused before anything runs, with one line naming the option, exit 2, and nothing
created on disk (no Redis is needed: the URLs point at a closed port).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from qsim.cli import main
from qsim.cli.common import EXIT_BAD_INPUT, EXIT_FAILURE, exit_code
from qsim.errors import CalibrationError, HarnessError, RedisUnavailable, ScenarioError, UsageError
from qsim.outpath import make_out_dir, out_dir, out_file

CLOSED = "redis://127.0.0.1:1/0"  # nothing listens on port 1: connection refused at once
CSV = "type,enqueued,started,finished\n" + "".join(f"a,{i},{i + 0.1},{i + 0.3}\n" for i in range(40))


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as e:  # argparse's own errors (a --redis that is not a URL)
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.fixture
def csv(tmp_path: Path) -> Path:
    path = tmp_path / "jobs.csv"
    path.write_text(CSV)
    return path


# ----------------------------------------------------------------------------- output paths


def out_cases(tmp: Path, csv: Path) -> list[tuple[list[str], str, str]]:
    """(argv, option, what the message says) for every output option of the CLI, into a missing tree."""
    deep = tmp / "no" / "such"
    return [
        (["calibrate", "--from", "csv", str(csv), "--out", str(deep / "cal.toml")], "--out", "does not exist"),
        (["calibrate", "--from", "csv", str(csv), "--plots", str(deep / "plots")], "--plots", "does not exist"),
        (["advise", "--redis", CLOSED, "--queue", "q", "--slo", "p95_wait<=2", "--out", str(deep / "a.toml")],
         "--out", "does not exist"),
        (["simulate", "workshop", "--jobs", "20", "--out", str(deep / "run")], "--out", "does not exist"),
        (["run", "workshop", "--redis", CLOSED, "--out", str(deep / "run")], "--out", "does not exist"),
        (["plan", "workshop", "--slo", "p95_wait<=2", "--vary", "pools.craftsmen.workers=1:2",
          "--plot", str(deep / "plan.png")], "--plot", "does not exist"),
    ]


def test_every_output_option_refuses_a_missing_folder_and_creates_nothing(
        tmp_path: Path, csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = listing(tmp_path)
    for argv, option, said in out_cases(tmp_path, csv):
        # When an output path names a folder that does not exist
        code, out, err = cli(capsys, *argv)
        # Then: exit 2, one line naming the option and the folder, no traceback, nothing made on disk
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and f"{option} {tmp_path / 'no' / 'such'}" in err and said in err, (argv, err)
        assert "Traceback" not in err and out == ""
        assert listing(tmp_path) == before, argv


def test_unwritable_and_odd_output_paths(tmp_path: Path, csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a_file = tmp_path / "a-file.txt"
    a_file.write_text("x")
    before = listing(tmp_path)
    cases = [
        ("/proc/qsim-test.toml", "cannot write in the folder '/proc'"),  # not writable even by root
        (str(a_file / "cal.toml"), "is not a folder"),                   # the "folder" is a file
        (str(tmp_path), "is a folder, not a file name"),                 # a folder where a file is wanted
        ("", "needs a path"),
        (str(tmp_path / ("x" * 300 + ".toml")), "file name too long"),
    ]
    for path, said in cases:
        code, _, err = cli(capsys, "calibrate", "--from", "csv", str(csv), "--out", path)
        assert code == 2 and said in err and err.count("\n") == 1 and "Traceback" not in err, (path, err)
    for argv, said in [(["--plots", str(a_file)], "exists and is not a folder"),
                       (["--plots", "/proc/qsim-plots"], "cannot write in the folder '/proc'")]:
        code, _, err = cli(capsys, "calibrate", "--from", "csv", str(csv), *argv)
        assert code == 2 and said in err and "--plots" in err, (argv, err)
    code, _, err = cli(capsys, "simulate", "workshop", "--jobs", "20", "--out", str(a_file))
    assert code == 2 and f"--out {a_file}: exists and is not a folder" in err
    assert listing(tmp_path) == before


def test_an_output_folder_is_created_one_level_and_a_file_needs_its_folder(tmp_path: Path, csv: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    # a folder option creates its last folder (documented in --help), never a tree
    code, _, err = cli(capsys, "calibrate", "--from", "csv", str(csv), "--plots", str(tmp_path / "plots"),
                       "--out", str(tmp_path / "cal.toml"))
    assert code == 0, err
    assert (tmp_path / "plots" / "a.png").is_file() and (tmp_path / "cal.toml").is_file()
    assert out_dir(tmp_path / "new") == tmp_path / "new" and not (tmp_path / "new").exists()  # a check creates nothing
    assert make_out_dir(tmp_path / "new").is_dir()
    with pytest.raises(UsageError, match="the folder .* does not exist"):
        out_file(tmp_path / "x" / "y.toml")
    with pytest.raises(UsageError, match="NUL"):
        out_file("a\0b.toml", "--out")


# ----------------------------------------------------------------------------- Redis URLs


REDIS_COMMANDS = [
    ["stats"], ["dlq", "list", "--queue", "q"], ["worker", "stepped_load:sleep_handler", "--queue", "q"],
    ["calibrate", "--from", "qsim", "--queue", "q"], ["calibrate", "--from", "bullmq", "--queue", "q"],
    ["calibrate", "--probe"], ["advise", "--queue", "q", "--slo", "p95_wait<=2"],
    ["run", "workshop", "--jobs", "5"], ["compare", "workshop", "--jobs", "5"],
]


@pytest.mark.parametrize("url, said", [
    ("localhost:6379", "not a Redis URL"), ("http://127.0.0.1:6379", "not a Redis URL"),
    ("redis://127.0.0.1:port/0", "could not be cast to integer"), ("redis://127.0.0.1:99999/0", "out of range"),
    ("redis://127.0.0.1:6379/zero", "must be a whole number such as /0"), ("redis://[::1/0", "Invalid IPv6 URL"),
])
def test_a_malformed_redis_url_is_refused_by_every_command(url: str, said: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    for argv in REDIS_COMMANDS:
        code, out, err = cli(capsys, *argv, "--redis", url)
        assert code == 2 and said in err and "--redis" in err and out == "", (argv, err)
        assert "Traceback" not in err


def test_a_malformed_redis_url_in_the_environment_is_named(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("REDIS_URL", "redis://h:notaport/0")
    for argv in (["stats"], ["advise", "--queue", "q", "--slo", "p95_wait<=2"], ["run", "workshop", "--jobs", "5"]):
        code, _, err = cli(capsys, *argv)
        assert code == 2 and "$REDIS_URL: not a Redis URL" in err and err.count("\n") == 1, (argv, err)


def test_an_unreachable_redis_is_exit_2_in_one_sentence(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in REDIS_COMMANDS:
        code, out, err = cli(capsys, *argv, "--redis", CLOSED)
        assert code == 2, (argv, err)
        assert err.count("\n") == 1 and f"cannot reach Redis at {CLOSED} (" in err, (argv, err)
        assert "Traceback" not in err and ". " not in err.split("(", 1)[1], err  # one sentence: no second one


def test_exit_codes_are_decided_in_one_place() -> None:
    for bad in (ScenarioError("x"), CalibrationError("x"), UsageError("x"), RedisUnavailable("x")):
        assert exit_code(bad) == EXIT_BAD_INPUT
    assert exit_code(HarnessError("a worker process exited")) == EXIT_FAILURE
    assert exit_code(KeyboardInterrupt()) == 130


# ----------------------------------------------------------------------------- SLOs and the cost


@pytest.mark.parametrize("slo, said", [
    ("p95_wait<=", "no number after '<='; write it like p95_wait<=2 (seconds)"),
    ("p95_wait=2", "'=' is not a comparison qsim knows; use <= (at most), >= (at least) or == (exactly), e.g. p95_wait<=2"),
    ("p95_wait=<2", "'=<' is not a comparison qsim knows; use <="),
    ("p95_wait 2", "no comparison; write METRIC OP NUMBER"),
    ("<=2", "no metric before '<='"),
    ("p95_wait<=2s", "the value after '<=' must be a number (seconds, e.g. p95_wait<=2), got '2s'"),
    ("p95_wait[]<=2", "empty job type"),
])
def test_slo_messages_say_what_is_expected(slo: str, said: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "plan", "workshop", "--slo", slo, "--vary", "pools.craftsmen.workers=1:2")
    assert code == 2 and f"--slo {slo!r}: {said}" in err, err
    code, _, err = cli(capsys, "advise", "--redis", CLOSED, "--queue", "q", "--slo", slo)
    assert code == 2 and f"--slo {slo!r}: {said}" in err, err
    code, _, err = cli(capsys, "worker", "stepped_load:sleep_handler", "--queue", "q", "--redis", CLOSED,
                       "--advise-slo", slo, "--metrics-port", "9999")
    assert code == 2 and f"--advise-slo {slo!r}: {said}" in err and "--slo" not in err.replace("--advise-slo", ""), err


def test_a_deeply_nested_cost_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    deep = "(" * 5000 + "workers" + ")" * 5000
    code, _, err = cli(capsys, "plan", "workshop", "--slo", "p95_wait<=2", "--vary", "pools.craftsmen.workers=1:2",
                       "--cost", deep)
    assert code == 2 and "nested" in err and err.count("\n") == 1 and "Recursion" not in err, err[:300]


def test_the_help_tells_where_outputs_go(capsys: pytest.CaptureFixture[str]) -> None:
    for argv, said in ((["calibrate", "--help"], "its parent must exist"), (["simulate", "--help"], "created if missing"),
                       (["plan", "--help"], "its folder must exist")):
        with pytest.raises(SystemExit):
            main(argv)
        assert said in " ".join(capsys.readouterr().out.split()), argv


def test_nothing_is_left_in_the_working_folder(tmp_path: Path, csv: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = os.listdir(tmp_path)
    code, _, _ = cli(capsys, "calibrate", "--from", "csv", str(csv), "--out", "sub/cal.toml")
    assert code == 2 and os.listdir(tmp_path) == before
