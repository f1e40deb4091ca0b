"""bench/converge/run.py's curve: cost per host as the hosts grow, and the fleet projection."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SPEC = importlib.util.spec_from_file_location("bench_converge_run", os.path.join(ROOT, "bench", "converge", "run.py"))
run = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(run)


def runs(case, *points, **extra):
    return [dict({"tree": "checkout", "case": case, "hosts": h, "cpu_s": cpu, "wall_s": wall, "rc": 0}, **extra)
            for h, cpu, wall in points]


def test_a_straight_line_through_the_runs_extends_to_the_fleet():
    # 10 s of play overhead, then 7 CPU-s and 3 wall-s per host
    curve = run.curve(runs("rerun", (1, 17.0, 33.0), (2, 24.0, 36.0), (4, 38.0, 42.0)), "checkout", "rerun", cores=2)
    assert curve["cpu_fixed_s"] == pytest.approx(10.0) and curve["cpu_per_extra_host_s"] == pytest.approx(7.0)
    assert curve["wall_per_extra_host_s"] == pytest.approx(3.0)
    assert curve["cpu_s_per_host"] == [17.0, 12.0, 9.5]
    assert curve["fleet_cpu_s"] == pytest.approx(7010.0) and curve["fleet_wall_floor_s"] == pytest.approx(3505.0)
    assert "| checkout | rerun | 1,2,4 | 17.0, 12.0, 9.5 | 10.0 | 7.00 | 3.00 | 7010 | 3505 s (1.0 h) |" in run.curve_text([curve])


def test_one_host_count_or_a_failed_run_gives_no_line():
    assert run.curve(runs("rerun", (4, 38.0, 42.0)), "checkout", "rerun") is None
    bad = runs("rerun", (1, 17.0, 33.0)) + runs("rerun", (2, 24.0, 36.0), problem="changed=3 on a converged host")
    assert run.curve(bad, "checkout", "rerun") is None
    # an expected failure (bad_input, rc 2) is a point of its line
    assert run.curve(runs("bad_input", (1, 4.0, 4.0), (2, 5.0, 4.5), rc=2), "checkout", "bad_input")["cpu_per_extra_host_s"] == 1.0
