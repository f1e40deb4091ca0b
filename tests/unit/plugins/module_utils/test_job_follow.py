# -*- coding: utf-8 -*-
# Copyright: llmops.serving contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""job_follow.follow over jobs of hours, with a fake clock: bounded, one line per interval, no recursion."""
import sys

import pytest

from ansible_collections.llmops.serving.plugins.module_utils import job_follow, weights


class FakeJob(object):
    """A job that ends at `ends_at` seconds on a fake clock; wait() returns early when it ends."""

    def __init__(self, ends_at):
        self.now = 0.0
        self.ends_at = ends_at
        self.lines = []
        self.checks = 0

    def clock(self):
        return self.now

    def wait(self, seconds):
        self.now = min(self.now + seconds, max(self.now, self.ends_at))

    def check(self):
        self.checks += 1
        return {"finished": self.now >= self.ends_at, "rc": 0}

    def describe(self, elapsed):
        return "download: %s" % job_follow.elapsed_text(elapsed)

    def follow(self, interval, timeout):
        return job_follow.follow(self.check, self.wait, self.describe, self.lines.append, interval, timeout,
                                 self.clock)


def test_a_six_hour_download_completes_with_one_line_per_interval():
    # Far past the few hundred rounds after which a self-including task file hits the recursion limit.
    job = FakeJob(ends_at=6 * 3600 + 7)
    status, rounds = job.follow(interval=15, timeout=86400)
    assert status["finished"] and rounds == 6 * 3600 // 15 == len(job.lines) == 1440
    assert rounds > sys.getrecursionlimit()
    assert job.lines[0] == "download: 15s" and job.lines[3] == "download: 1m00s"
    assert job.lines[-1] == "download: 6h00m00s"
    # it noticed the end 7 s into the last interval, not at the interval's end
    assert job.now == 6 * 3600 + 7 and job.checks == rounds + 1


def test_a_job_that_outlives_the_timeout_fails_after_exactly_the_timeout():
    job = FakeJob(ends_at=10 ** 9)
    with pytest.raises(job_follow.JobTimeout) as e:
        job.follow(interval=15, timeout=86400)
    assert e.value.rounds == 5760 and e.value.elapsed == 86400 and "still running after 24h00m00s" in str(e.value)


def test_the_last_wait_is_cut_to_the_time_left():
    job = FakeJob(ends_at=10 ** 9)
    with pytest.raises(job_follow.JobTimeout) as e:
        job.follow(interval=20, timeout=50)
    assert e.value.rounds == 3 and job.now == 50 and job.lines[-1] == "download: 50s"


def test_a_job_already_done_prints_nothing():
    job = FakeJob(ends_at=0)
    status, rounds = job.follow(interval=15, timeout=60)
    assert status["finished"] and rounds == 0 and job.lines == []


@pytest.mark.parametrize("interval, timeout", [(0, 60), (15, 0), (-1, 60)])
def test_intervals_and_timeouts_must_be_positive(interval, timeout):
    with pytest.raises(ValueError, match="above 0"):
        FakeJob(ends_at=1).follow(interval=interval, timeout=timeout)


@pytest.mark.parametrize("seconds, text", [(0, "0s"), (59.9, "59s"), (60, "1m00s"), (3599, "59m59s"),
                                           (3600, "1h00m00s"), (11 * 3600 + 61, "11h01m01s")])
def test_elapsed_text(seconds, text):
    assert job_follow.elapsed_text(seconds) == text


def test_build_steps_reads_the_last_ninja_counter():
    log = "-- Configuring done\n[1/112] Building CUDA object a.o\nwarning: [x]\n[37/112] Building CXX object b.o\n"
    assert job_follow.build_steps(log) == "37/112 objects compiled"
    assert job_follow.build_steps("-- The CXX compiler identification is GNU 12.2.0\n") == "configuring"
    assert job_follow.build_steps("") == "configuring"


def test_size_line_reads_du():
    assert job_follow.size_line("3328599654\t/opt/llmops/venvs/v\n", "/opt/llmops/venvs/v") == "3.1 GiB in /opt/llmops/venvs/v"
    assert job_follow.size_line("", "/opt/v") == "nothing in /opt/v yet"
    assert job_follow.size_line("du: cannot access '/opt/v': No such file or directory", "/opt/v") == "nothing in /opt/v yet"


def test_a_follower_whose_run_is_gone_stops_at_its_next_round():
    job = FakeJob(ends_at=6 * 3600)
    parent_alive = iter([True, True, True, False])
    with pytest.raises(job_follow.FollowerOrphaned) as e:
        job_follow.follow(job.check, job.wait, job.describe, job.lines.append, 240, 24 * 3600, job.clock,
                          alive=lambda: next(parent_alive))
    assert e.value.rounds == 3 and job.checks == 3 and len(job.lines) == 3
    assert "ansible-playbook is gone after 12m00s" in str(e.value)


# ------------------------------------------------------------------------------ progress records
READINESS_RECORD = {"status": "unit activating (start), waiting for /health",
                    "detail": "last: /health answered HTTP 503; journal: INFO [loader.py:80] Loading weights took 310.21 seconds",
                    "state": "running", "phase": "health", "last": "/health answered HTTP 503", "elapsed_s": 312.0,
                    "attempts": 156, "unit": "activating (start)", "journal": "INFO ...", "time": 1.7e9}


def test_a_status_record_is_its_status_and_detail():
    assert job_follow.describe_progress(READINESS_RECORD) == (
        "unit activating (start), waiting for /health; last: /health answered HTTP 503; "
        "journal: INFO [loader.py:80] Loading weights took 310.21 seconds")
    # no detail, an end state in brackets (as the byte records show theirs)
    assert job_follow.describe_progress({"status": "llmops-vllm.service exited while starting: RuntimeError: x",
                                         "state": "failed"}) == \
        "llmops-vllm.service exited while starting: RuntimeError: x [failed]"
    assert job_follow.describe_progress({"status": "waiting for /health"}) == "waiting for /health"


def test_a_status_record_is_one_line_of_bounded_length():
    line = job_follow.describe_progress({"status": "waiting\nfor  /health", "detail": "last: " + "x" * 1000})
    assert "\n" not in line and line.startswith("waiting for /health; last: xxx")
    assert len(line) == job_follow.STATUS_CHARS and line.endswith("...")


def test_byte_records_and_no_record_read_as_before():
    p = {"phase": "download", "done": 2 ** 30, "total": 4 * 2 ** 30, "rate": 2 ** 20, "eta_s": 3072, "state": "running"}
    assert job_follow.describe_progress(p) == weights.describe_progress(p) == \
        "download: 1.0 GiB of 4.0 GiB (25.0%), 1.0 MiB/s, ETA 51m12s"
    assert job_follow.describe_progress({}) == job_follow.describe_progress(None) == "no progress reported yet"
    assert job_follow.describe_progress(["not", "a", "record"]) == "no progress reported yet"


def test_a_three_hour_readiness_wait_prints_its_state_once_per_interval():
    # An engine that loads for three hours (a large model from slow storage): the follower prints the
    # record the module last wrote, one line per 15 s, without recursion, until the job ends.
    job = FakeJob(ends_at=3 * 3600 + 4)

    def record(elapsed):
        phase = "health" if elapsed < 3 * 3600 - 60 else "generation"
        waiting = "waiting for /health" if phase == "health" else "waiting for a real generation (greedy and sampled)"
        return {"status": "unit activating (start), " + waiting, "detail": "last: /health answered HTTP 503",
                "state": "running", "elapsed_s": elapsed}

    def describe(elapsed):
        return "qwen3-235b readiness: %s (%s elapsed)" % (job_follow.describe_progress(record(elapsed)),
                                                          job_follow.elapsed_text(elapsed))

    job.describe = describe
    status, rounds = job.follow(interval=15, timeout=3 * 3600 + 300)
    assert status["finished"] and rounds == 3 * 3600 // 15 == len(job.lines) == 720
    assert rounds > sys.getrecursionlimit() // 2
    assert job.lines[0] == ("qwen3-235b readiness: unit activating (start), waiting for /health; "
                            "last: /health answered HTTP 503 (15s elapsed)")
    assert job.lines[-1].startswith("qwen3-235b readiness: unit activating (start), waiting for a real generation")
    assert job.lines[-1].endswith("(3h00m00s elapsed)")


def test_a_two_hour_venv_install_prints_the_venv_growing():
    # uv filling a venv at 1 MiB/s for two hours, `du -sb` of it once per interval.
    venv = "/opt/llmops/venvs/vllm-0.32.0-37ea9d68ebb9"
    job = FakeJob(ends_at=2 * 3600 + 3)

    def describe(elapsed):
        du = "%d\t%s\n" % (int(elapsed) * 2 ** 20, venv)
        return "venv install (uv): %s (%s elapsed)" % (job_follow.size_line(du, venv), job_follow.elapsed_text(elapsed))

    job.describe = describe
    status, rounds = job.follow(interval=15, timeout=3600 * 3)
    assert status["finished"] and rounds == 480 == len(job.lines)
    assert job.lines[0] == "venv install (uv): 15.0 MiB in %s (15s elapsed)" % venv
    assert job.lines[-1] == "venv install (uv): 7.0 GiB in %s (2h00m00s elapsed)" % venv
    sizes = [float(line.split(": ", 1)[1].split()[0]) for line in job.lines if " GiB in " in line]
    assert sizes == sorted(sizes)
