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
from qsim.results.outpath import make_out_dir, out_dir, out_file
from qsim.spec.scenario import Scenario

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


AUTOSCALED = """
name = "scaled"
duration = 120.0
[[queues]]
name = "q"
[[jobs]]
name = "j"
queue = "q"
arrival = { kind = "poisson", rate = 2.0 }
service = { kind = "exponential", mean = 0.5 }
[[pools]]
name = "p"
queues = ["q"]
[[autoscalers]]
pool = "p"
min = 1
max = 4
target = 4
"""


def autoscaled(tmp: Path) -> Path:
    path = tmp / "scaled.toml"
    if not path.exists():
        path.write_text(AUTOSCALED)
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
        (["compare", "workshop", "--redis", CLOSED, "--out", str(deep / "cmp")], "--out", "does not exist"),
        (["compare", "workshop", "--target", "bullmq", "--redis", CLOSED, "--out", str(deep / "cmp")], "--out",
         "does not exist"),
        (["autoscale", str(autoscaled(tmp)), "--slo", "p95_wait<=2", "--emit", "keda", str(deep / "k.yaml")],
         "--emit keda", "does not exist"),
        (["autoscale", str(autoscaled(tmp)), "--slo", "p95_wait<=2", "--emit", "hpa", str(deep / "h.yaml")],
         "--emit hpa", "does not exist"),
    ]


def test_every_output_option_refuses_a_missing_folder_and_creates_nothing(
        tmp_path: Path, csv: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cases = out_cases(tmp_path, csv)
    before = listing(tmp_path)
    for argv, option, said in cases:
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


@pytest.mark.parametrize("path, said", [("/proc/x.yaml", "cannot write in the folder '/proc'"),
                                        (".", "is a folder, not a file name")])
def test_emit_is_checked_before_the_run(path: str, said: str, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    # Given an autoscaled scenario and an --emit FILE that cannot be written (a folder, /proc)
    scenario = autoscaled(tmp_path)
    before = listing(tmp_path)
    # When qsim autoscale is asked to emit there (a run of every policy would take seconds)
    code, out, err = cli(capsys, "autoscale", str(scenario), "--slo", "p95_wait<=2", "--emit", "keda", path)
    # Then it is refused at once, in one line naming the option, nothing run and nothing written
    assert code == 2 and f"--emit keda {path}: {said}" in err and err.count("\n") == 1, err
    assert out == "" and listing(tmp_path) == before


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


@pytest.mark.parametrize("argv, option, bound", [
    (["simulate", "workshop"], "--jobs", "must be >= 1"),
    (["simulate", "workshop"], "--replications", "must be >= 2 (a band needs several runs)"),
    (["simulate", "workshop"], "--seed", "must be >= 0"),
    (["plan", "workshop", "--slo", "p95_wait<=2", "--vary", "pools.craftsmen.workers=1:2"], "--replications",
     "must be a whole number >= 1 or auto"),
    (["plan", "workshop", "--slo", "p95_wait<=2", "--vary", "pools.craftsmen.workers=1:2"], "--processes",
     "must be >= 1"),
])
def test_an_integer_option_names_its_one_bound_whatever_the_bad_value(
        argv: list[str], option: str, bound: str, capsys: pytest.CaptureFixture[str]) -> None:
    # Given an option's lowest allowed value, low = the number its bound names
    low = int(bound.split(">= ")[1].split()[0])
    # When it is given one below and well below the bound
    for bad in (low - 1, low - 2):
        code, out, err = cli(capsys, *argv, option, str(bad))
        # Then both refusals state the same bound, with the value
        assert code == 2 and out == "" and f"argument {option}: {bound}, got " in err and str(bad) in err, err


@pytest.mark.parametrize("command", [["simulate", "workshop"],
                                     ["plan", "workshop", "--slo", "p95_wait<=2", "--vary", "pools.craftsmen.workers=1"]])
def test_a_seed_is_one_a_scenario_file_can_hold(command: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    # (a larger one ran, and its Summary named a seed no scenario file can be given: TOML's integers are 64-bit)
    code, out, err = cli(capsys, *command, "--seed", str(2**63))
    assert code == 2 and out == "" and f"argument --seed: must be at most {2**63 - 1}" in err
    assert cli(capsys, "simulate", "workshop", "--seed", str(2**63 - 1), "--json")[0] == 0


# ----------------------------------------------------------------------------- SLOs and the cost


@pytest.mark.parametrize("slo, said", [
    ("p95_wait<=", "no number after '<='; write it like p95_wait<=2 (seconds)"),
    ("p95_wait=2", "'=' is not a comparison qsim knows; use <= (at most), >= (at least) or == (exactly), e.g. p95_wait<=2"),
    ("p95_wait=<2", "'=<' is not a comparison qsim knows; use <="),
    ("p95_wait 2", "no comparison; write METRIC OP NUMBER"),
    ("<=2", "no metric before '<='"),
    ("p95_wait<=2s", "the value after '<=' must be a number (seconds, e.g. p95_wait<=2), got '2s'"),
    ("p95_wait[]<=2", "empty job type"),
    ("p95_wait<=-1", "no run can meet it: p95_wait is never below 0"),
    ("throughput<0", "no run can meet it: throughput is never below 0"),
    ("utilization>=2", "no run can meet it: utilization is never above 1"),
    ("utilization>1", "no run can meet it: utilization is never above 1"),
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


# ----------------------------------------------------------------------------- runs too large for the machine


def one_queue(tmp: Path, rate: float, extra: str = "") -> Path:
    path = tmp / "big.toml"
    path.write_text(f'name = "big"\nduration = 60.0\n{extra}\n[[queues]]\nname = "q"\n[[jobs]]\nname = "a"\n'
                    f'queue = "q"\narrival = {{ kind = "poisson", rate = {rate} }}\n'
                    'service = { kind = "constant", mean = 0.01 }\n[[pools]]\nname = "p"\nqueues = ["q"]\n')
    return path


@pytest.mark.parametrize("argv, said", [
    (["--window", "1e-9"], "--window 1e-09: windows of 1e-09 s over the measured run of 60 s are 6e+10 windows"),
    ([], "window = 1e-09: windows of 1e-09 s"),
])
def test_a_window_too_short_for_memory_is_refused_before_the_run(argv: list[str], said: str, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # Given a small scenario, its windows of a nanosecond (from the file when no --window is given)
    path = one_queue(tmp_path, 5.0, "" if argv else "window = 1e-9")
    for command in (["simulate"], ["run", "--redis", CLOSED], ["compare", "--redis", CLOSED]):
        # When it is run (today: a MemoryError after the run, or a hang)
        code, out, err = cli(capsys, *command[:1], str(path), *command[1:], *argv)
        # Then: exit 2 at once, one sentence naming the window and the memory it would need
        assert code == 2 and said in err and "more than this machine's" in err, (command, err)
        assert err.count("\n") == 1 and out == "" and "Traceback" not in err


def test_a_rate_too_high_for_memory_is_refused_before_the_run(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    path = one_queue(tmp_path, 1e12)
    for argv in (["simulate", str(path)], ["run", str(path), "--redis", CLOSED],
                 ["plan", str(path), "--slo", "p95_wait<=2", "--vary", "pools.p.workers=1:2"]):
        code, out, err = cli(capsys, *argv)
        assert code == 2 and "jobs[0].arrival: 1e+12 jobs/s for 60 s is about 6e+13 jobs" in err, (argv, err)
        assert err.count("\n") == 1 and out == "" and "Traceback" not in err


def test_expected_counts_are_what_the_arrivals_draw(tmp_path: Path) -> None:
    import numpy as np

    from qsim import dists

    profile = dists.RateProfile(points=((0.0, 10.0), (50.0, 40.0), (50.0, 5.0), (100.0, 5.0)), shape="linear")
    kinds = [dists.PoissonArrivals(rate=200.0), dists.ConstantArrivals(rate=7.0),
             dists.BurstArrivals(rate=30.0, size=6), dists.ProfileArrivals(profile=profile),
             dists.BurstArrivals(size=5, profile=profile),
             dists.TraceArrivals(path=tmp_path / "t.csv", at=tuple(float(x) for x in range(150)))]
    for arrival in kinds:
        drawn = arrival.times(np.random.default_rng(1), 100.0).size
        # within 4 standard deviations of a Poisson count (exact for the deterministic kinds, up to a batch)
        assert abs(arrival.expected_count(100.0) - drawn) <= 4 * drawn ** 0.5 + 6, (arrival, drawn)


def test_the_bound_is_the_work_against_the_memory_not_a_constant(tmp_path: Path) -> None:
    from qsim import Scenario
    from qsim.spec.run_size import BYTES_PER_JOB, bytes_per_window, check_run_size, expected_jobs
    from qsim.spec.workload import draw_jobs

    # Given a scenario of 6 million jobs (100,000 jobs/s for 60 s)
    s = Scenario.from_toml(one_queue(tmp_path, 1e5))
    assert expected_jobs(s) == {0: pytest.approx(6e6)}
    need = 6e6 * BYTES_PER_JOB
    # Then it is refused on a machine too small for its draws and accepted on one just large enough
    with pytest.raises(ScenarioError, match=r"about 6e\+06 jobs, which need at least 137 MiB"):
        check_run_size(s, memory=int(need * 0.9))
    check_run_size(s, memory=int(need * 1.1))
    # And windows are judged the same way: 60 one-second windows against a few kilobytes
    s1 = Scenario.from_toml(one_queue(tmp_path, 1.0, "window = 1.0"))
    check_run_size(s1, memory=60 * bytes_per_window() + 1)
    with pytest.raises(ScenarioError, match="are 60 windows"):
        check_run_size(s1, memory=59 * bytes_per_window())
    # And children count: a fan-out of 1,000 per job multiplies the jobs drawn
    fan = Scenario.from_dict({**s1.to_dict(), "jobs": [
        {**s1.to_dict()["jobs"][0], "fan_out": {"job": "kid", "count": 1000}},
        {"name": "kid", "queue": "q", "service": {"kind": "constant", "mean": 0.01}}]})
    assert expected_jobs(fan)[0] == pytest.approx(60 * 1001)
    # And the library refuses it too, before drawing (every runner draws through draw_jobs)
    with pytest.raises(ScenarioError, match="1e\\+12 jobs/s"):
        draw_jobs(Scenario.from_toml(one_queue(tmp_path, 1e12)))


# ----------------------------------------------------------------------------- engine limits at load


def scenario_text(queue: str = "q", job: str = "a", pool: str = "p", weights: str = "") -> str:
    return (f'name = "s"\nduration = 10.0\n[[queues]]\nname = "{queue}"\n[[queues]]\nname = "r"\n[[jobs]]\n'
            f'name = "{job}"\nqueue = "{queue}"\narrival = {{ kind = "poisson", rate = 2.0 }}\n'
            f'service = {{ kind = "constant", mean = 0.01 }}\n[[pools]]\nname = "{pool}"\nqueues = ["{queue}", "r"]\n'
            f'policy = "wrr"\n{weights}\n')


@pytest.mark.parametrize("kwargs, said", [
    ({"queue": "q" * 10_000}, "queues[0].name must be at most 256 characters (the engine's limit), got 10000"),
    ({"job": "j" * 193}, "jobs[0].name must be at most 192 characters (its job ids must fit the engine's 256), "
                         "got 193"),
    ({"pool": "p" * 245}, "pools[0].name must be at most 244 bytes in UTF-8"),
    ({"weights": "weights = { r = 0.5 }"}, "pools[0].weights.r must be a whole number >= 1"),
    ({"weights": "weights = { r = 1.9 }"}, "pools[0].weights.r must be a whole number >= 1 (weighted round-robin "
                                           "counts whole turns, in the model and the engine alike), got 1.9"),
    ({"weights": "weights = { r = 0 }"}, "pools[0].weights.r must be a whole number >= 1"),
])
def test_engine_limits_are_checked_when_the_scenario_is_loaded(kwargs: dict[str, str], said: str, tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    # Given a scenario the engine could not run as written (a name past its limits, a fractional wrr weight)
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(**kwargs))
    for argv in (["simulate", str(path)], ["run", str(path), "--redis", CLOSED],
                 ["compare", str(path), "--redis", CLOSED], ["theory", str(path)]):
        # When any command loads it (the model as well as the engine: both must run the same policy)
        code, out, err = cli(capsys, *argv)
        # Then: exit 2, one sentence naming the key, no traceback
        assert code == 2 and f"{path}: {said}" in err and err.count("\n") == 1, (argv, err)
        assert out == "" and "Traceback" not in err


def test_whole_weights_and_names_at_the_limits_load(tmp_path: Path) -> None:
    from qsim import Scenario

    path = tmp_path / "s.toml"
    path.write_text(scenario_text(queue="q" * 256, job="j" * 192, pool="p" * 244, weights="weights = { r = 3.0 }"))
    s = Scenario.from_toml(path)
    assert s.pools[0].weights == {"r": 3} and isinstance(s.pools[0].weights["r"], int)



def test_an_slo_no_run_can_meet_is_refused_before_any_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given an autoscaled scenario and objectives below zero (per run, and per window)
    scenario = autoscaled(tmp_path)
    for slo in ("p95_wait<=-1", "p95_wait<=-1 in 95% of windows", "mean_latency==-0.5"):
        for argv in (["autoscale", str(scenario)], ["compare", "workshop", "--redis", CLOSED]):
            # When a command that would run first and judge after is given one
            code, out, err = cli(capsys, *argv, "--slo", slo)
            # Then it is refused at once (today: the run, then "no policy meets it")
            assert code == 2 and f"--slo {slo!r}: no run can meet it" in err and err.count("\n") == 1, (argv, err)
            assert out == ""
    # And an objective at zero is a real one: a queue may never wait
    from qsim.analysis.plan import parse_slo
    assert parse_slo("p95_wait<=0").value == 0 and parse_slo("dead==0").value == 0


def test_a_queue_name_the_engine_cannot_key_is_refused_before_an_engine_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a queue name with a space: the model runs it, the engine's keys cannot hold it
    path = tmp_path / "s.toml"
    path.write_text(scenario_text(queue="bulk jobs"))
    assert cli(capsys, "simulate", str(path), "--json")[0] == 0
    for argv in (["run", str(path), "--redis", CLOSED], ["compare", str(path), "--redis", CLOSED]):
        # When it is run on the engine (it was a ValueError traceback)
        code, out, err = cli(capsys, *argv)
        # Then: exit 2 before Redis is reached, one sentence naming the key
        assert code == 2 and "queues[0].name must be a non-empty string without braces, colons or spaces, got " \
            "'bulk jobs'" in err and err.count("\n") == 1, (argv, err)


BASE_TOML = """name = "b"
duration = 60
[[queues]]
name = "q"
[[jobs]]
name = "a"
queue = "q"
arrival = { kind = "poisson", rate = 2 }
service = { kind = "exponential", mean = 0.2 }
[[pools]]
name = "p"
queues = ["q"]
"""


@pytest.mark.parametrize("which", ["scenario", "csv", "yaml"])
def test_a_file_that_is_not_utf8_is_named_in_one_line_with_exit_2(which: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    # Given a Latin-1 byte (é) in the scenario, in a CSV the scenario reads, or in a Kubernetes YAML
    scenario = tmp_path / "s.toml"
    argv = ["simulate", str(scenario)]
    if which == "scenario":
        scenario.write_bytes(BASE_TOML.replace('"b"', '"caf\xe9"').encode("latin-1"))
        bad = scenario
    elif which == "csv":
        bad = tmp_path / "times.csv"
        bad.write_bytes(b"0.1\n\xe9\n")
        scenario.write_text(BASE_TOML.replace('kind = "exponential", mean = 0.2',
                                              'kind = "empirical", path = "times.csv"'))
    else:
        bad = tmp_path / "so.yaml"
        bad.write_bytes(b"kind: ScaledObject\nmetadata:\n  name: caf\xe9\n")
        scenario.write_text(BASE_TOML)
        argv = ["autoscale", str(scenario), "--k8s", str(bad), "--slo", "p95_wait<=2"]
    code, out, err = cli(capsys, *argv)
    # Then it is bad input (exit 2), said in one line naming the file and the byte, not a traceback
    assert code == EXIT_BAD_INPUT, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert bad.name in err and "not UTF-8" in err and "0xe9" in err


def test_an_autoscalers_slo_with_an_unknown_metric_is_named_by_its_key(tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "slo.toml"
    scenario.write_text(BASE_TOML + '[[autoscalers]]\npool = "p"\npolicy = "qsim"\nslo = "banana<=2"\n')
    code, _, err = cli(capsys, "simulate", str(scenario))
    # the file and the key, not a --slo option simulate does not have
    assert code == EXIT_BAD_INPUT
    assert f"{scenario}: autoscalers[0].slo 'banana<=2': unknown metric 'banana'" in err and "--slo" not in err


def test_a_byte_order_mark_is_read_as_the_start_of_utf8_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # Given a scenario saved with a UTF-8 byte order mark (Windows editors write one), reading a CSV exported
    # with one too, whose first row is a number (Excel's "CSV UTF-8")
    times = tmp_path / "times.csv"
    times.write_bytes(b"\xef\xbb\xbf0.25\n0.25\n0.25\n")
    scenario = tmp_path / "s.toml"
    scenario.write_bytes(b"\xef\xbb\xbf" + BASE_TOML.replace('kind = "exponential", mean = 0.2',
                                                            'kind = "empirical", path = "times.csv"').encode())
    # When it is loaded
    s = Scenario.from_toml(scenario)
    # Then the mark is not content: the file is valid TOML (it was "not valid TOML ... line 1") and the CSV's
    # first value is kept, not skipped as a header row
    (job,) = s.jobs
    assert job.service.values == (0.25, 0.25, 0.25)
    code, _, err = cli(capsys, "simulate", str(scenario), "--json")
    assert code == 0, err


def test_a_vary_path_given_twice_is_named_not_overwritten(capsys: pytest.CaptureFixture[str]) -> None:
    # (the last one won: only workers = 4 was planned)
    code, out, err = cli(capsys, "plan", "workshop", "--slo", "p95_wait<=2", "--vary", "pools.craftsmen.workers=1",
                         "--vary", "pools.craftsmen.workers=2")
    assert code == 2 and out == "" and "--vary pools.craftsmen.workers is given twice" in err


@pytest.mark.parametrize("argv", [["calibrate", "--from", "qsim"], ["advise", "--slo", "p95_wait<=2"]])
def test_a_queue_given_twice_is_named_before_redis_is_read(argv: list[str],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    # (calibrate read each job twice: twice the rate, misfit as bursts, twice the concurrency)
    code, out, err = cli(capsys, *argv, "--redis", CLOSED, "--queue", "c1", "--queue", "c1")
    assert code == 2 and out == "" and "--queue c1 is given twice" in err
