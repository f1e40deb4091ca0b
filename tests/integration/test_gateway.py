"""The TLS gateway in front of the engine, seen from another host and from the engine host.

Run by the default scenario's verifier (testinfra, podman backend). The verifier env names what
was deployed: LLMOPS_GATEWAY_PORT, LLMOPS_GATEWAY_KEYS (name=key,...), LLMOPS_GATEWAY_CLIENT_HOST
(an engine-less container on the same network), LLMOPS_MODEL, LLMOPS_LISTEN, LLMOPS_API_KEY.
"""
import base64
import json
import os
import re
import shlex
import time
import uuid

import pytest
import testinfra

from test_rerun import playbook

ENGINE = os.environ.get("LLMOPS_ENGINE", "vllm")
MODEL = os.environ.get("LLMOPS_MODEL", "qwen3-tiny")
LISTEN = os.environ.get("LLMOPS_LISTEN", "127.0.0.1:8000")
ENGINE_KEY = os.environ["LLMOPS_API_KEY"]
PORT = os.environ.get("LLMOPS_GATEWAY_PORT", "8443")
# Scenarios that test the gateway name its client keys and a second (client) host; others skip.
KEYS = dict(kv.split("=", 1) for kv in os.environ.get("LLMOPS_GATEWAY_KEYS", "").split(",") if "=" in kv)
CLIENT = os.environ.get("LLMOPS_GATEWAY_CLIENT_HOST", "")
# the certificate's subjectAltName (inventory_hostname; the checkout's suffix set by the Makefile)
GATEWAY_NAME = "llmops-default" + os.environ.get("LLMOPS_HOST_SUFFIX", "")
CERT = "/etc/nginx/llmops/gateway.crt"
# The LoRA adapters the vLLM leg serves by name (SGLang's LoRA needs a GPU), and the clients'
# priorities (higher is served sooner).
ADAPTERS = sorted(n for n in os.environ.get("LLMOPS_LORA_ADAPTERS", "").split(",") if n) if ENGINE == "vllm" else []
PRIORITIES = dict((kv.split("=", 1)[0], int(kv.split("=", 1)[1]))
                  for kv in os.environ.get("LLMOPS_CLIENT_PRIORITIES", "").split(",") if "=" in kv)
ACCESS_LOG = "/var/log/nginx/llmops-gateway.access.log"
INJECTION = "{{ 7 * 7 }} {% for x in range(3) %}X{% endfor %} <script>alert('x')</script> {# c #}"

pytestmark = pytest.mark.skipif(not CLIENT, reason="no client host in this scenario")


@pytest.fixture(scope="module")
def client(host):
    """The other host, trusting the gateway's certificate."""
    other = testinfra.get_host("podman://%s" % CLIENT)
    pem = host.file(CERT).content_string
    other.check_output("cat > /tmp/gateway.crt <<'EOF'\n%s\nEOF" % pem.strip())
    return other


@pytest.fixture(scope="module")
def host_ip(host):
    return host.check_output("hostname -I").split()[0]


def curl(on, url, method="GET", body=None, key=None, headers=(), extra=(), resolve=None, raw_body=None):
    """curl on a host; returns (status, headers text, body text). status 0 = no connection."""
    cmd = ["curl", "-sS", "-m", "60", "-o", "/tmp/gw-body", "-D", "/tmp/gw-head", "-w", "%{http_code}",
           "-X", method, "--cacert", "/tmp/gateway.crt"]
    if resolve:
        cmd += ["--resolve", resolve]
    if key is not None:
        cmd += ["-H", "Authorization: Bearer %s" % key]
    for h in headers:
        cmd += ["-H", h]
    if body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", json.dumps(body)]
    if raw_body is not None:
        cmd += ["-H", "Content-Type: application/json", "--data-binary", "@%s" % raw_body]
    cmd += list(extra) + [url]
    res = on.run(" ".join(shlex.quote(c) for c in cmd) + "; true")
    status = int(res.stdout.strip() or 0)
    head = on.run("cat /tmp/gw-head 2>/dev/null").stdout
    text = on.run("cat /tmp/gw-body 2>/dev/null").stdout
    on.run("rm -f /tmp/gw-body /tmp/gw-head")
    return status, head, text


def gw(client, host_ip, path, **kw):
    """A request from the client host to the gateway over TLS, certificate verified."""
    return curl(client, "https://%s:%s%s" % (GATEWAY_NAME, PORT, path),
                resolve="%s:%s:%s" % (GATEWAY_NAME, PORT, host_ip), **kw)


def chat(content, **extra):
    body = {"model": MODEL, "messages": [{"role": "user", "content": content}], "max_tokens": 8,
            "temperature": 0}
    body.update(extra)
    return body


def engine(host, path, body):
    """The engine itself, over loopback on its host."""
    cmd = ["curl", "-sS", "-m", "60", "-H", "Authorization: Bearer %s" % ENGINE_KEY,
           "-H", "Content-Type: application/json", "--data-binary", json.dumps(body), "http://%s%s" % (LISTEN, path)]
    return json.loads(host.check_output(" ".join(shlex.quote(c) for c in cmd)))


def test_nginx_runs_and_listens_on_all_addresses(host):
    assert host.service("nginx").is_running
    assert host.service("nginx").is_enabled
    listeners = host.check_output("ss -Hltn 'sport = :%s'" % PORT)
    assert "0.0.0.0:%s" % PORT in listeners


def test_no_plain_http_site(host):
    assert host.run("ss -Hltn 'sport = :80'").stdout.strip() == ""


@pytest.mark.parametrize("key", [None, "wrong-key-0123456789abcdef", ENGINE_KEY, "Bearer"])
def test_chat_without_a_client_key_is_refused(client, host_ip, key):
    status, head, text = gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat("hi"), key=key)
    assert status == 401, text
    assert "www-authenticate: bearer" in head.lower()
    assert json.loads(text)["error"]["code"] == 401


def test_malformed_authorization_is_refused(client, host_ip):
    key = next(iter(KEYS.values()))
    status, _, _ = gw(client, host_ip, "/v1/models", headers=["Authorization: Basic %s" % key])
    assert status == 401
    status, _, _ = gw(client, host_ip, "/v1/models", key=key + "x")
    assert status == 401


@pytest.mark.parametrize("name", sorted(KEYS))
def test_each_client_key_gets_a_completion(client, host_ip, name):
    status, head, text = gw(client, host_ip, "/v1/chat/completions", method="POST",
                            body=chat("Hello, who are you?"), key=KEYS[name])
    assert status == 200, text
    assert "application/json" in head.lower()
    body = json.loads(text)
    assert body["model"] == MODEL
    assert body["usage"]["completion_tokens"] > 0


def test_streamed_completion_arrives_in_sse_chunks(client, host_ip):
    key = next(iter(KEYS.values()))
    status, head, text = gw(client, host_ip, "/v1/chat/completions", method="POST", extra=["-N"],
                            body=chat("Count to five.", stream=True, max_tokens=16), key=key)
    assert status == 200, text
    assert "text/event-stream" in head.lower()
    events = [line[len("data: "):] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert len(chunks) >= 3
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)


def test_models_lists_only_the_served_names(client, host_ip):
    status, _, text = gw(client, host_ip, "/v1/models", key=next(iter(KEYS.values())))
    assert status == 200
    body = json.loads(text)
    assert [m["id"] for m in body["data"]] == [MODEL] + ADAPTERS
    assert "/var/lib" not in text and all("root" not in m for m in body["data"])


@pytest.fixture(scope="module")
def sdk(host, host_ip, tmp_path_factory):
    """The official OpenAI SDK on the controller, pinned to the gateway's certificate."""
    import openai
    import ssl
    cert = tmp_path_factory.mktemp("gateway") / "gateway.crt"
    cert.write_text(host.file(CERT).content_string)
    ctx = ssl.create_default_context(cafile=str(cert))
    ctx.check_hostname = False  # the certificate names the inventory host, reached here by address
    return openai.OpenAI(base_url="https://%s:%s/v1" % (host_ip, PORT), api_key=sorted(KEYS.values())[0], max_retries=0,
                         timeout=120, http_client=openai.DefaultHttpxClient(verify=ctx, trust_env=False))


# One tool, as the field report's agents send it. Its argument is an enum: random weights fill a
# free string with whatever bytes the grammar lets through until max_tokens, and SGLang 0.5.23's
# let a raw control character and broken UTF-8 into one, which no JSON parser reads (the engine then
# drops the call). Without the schema held to, the arguments are anything: "false", {" {":666...}.
WEATHER = {"type": "object", "additionalProperties": False, "required": ["city"],
           "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]}}}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather in a city",
                                           "parameters": WEATHER}}]
NAMED = {"type": "function", "function": {"name": "get_weather"}}


@pytest.fixture(scope="module")
def no_whitespace(served_tokenizer):
    """logit_bias that keeps greedy decoding off the served tokenizer's whitespace-only tokens. The
    engines' JSON grammars allow whitespace between tokens, and random weights prefer it: a call
    would never close before max_tokens, which proves nothing. The grammar still decides which of
    the other tokens may come, so an engine that does not hold the arguments to the schema still
    answers outside it (vLLM 0.32 without --tool-strict-level: arguments `{" {":666...`)."""
    # byte-level BPE: G-breve is a space, C-dot a newline, c-dot a tab, c-caron a carriage return
    return dict((str(i), -100) for t, i in served_tokenizer["model"]["vocab"].items()
                if t and set(t) <= set(u"\u0120\u010a\u0109\u010d"))


@pytest.fixture(scope="module")
def ends_after_the_call(served_tokenizer, no_whitespace):
    """no_whitespace, and the end of the turn wherever a grammar allows it, as a trained model ends
    its turn after a call: SGLang's Qwen tool-call grammar lets text follow a forced call, which
    random weights would write until max_tokens."""
    bias = dict(no_whitespace)
    bias.update((str(t["id"]), 100) for t in served_tokenizer["added_tokens"] if t["content"] == "<|im_end|>")
    return bias


def weather_call(sdk, bias, tool_choice, stream=False):
    return sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}],
                                       tools=TOOLS, tool_choice=tool_choice, max_tokens=96, temperature=0,
                                       logit_bias=bias, stream=stream, parallel_tool_calls=False)


def assert_weather_call(calls):
    import jsonschema
    assert calls and len(calls) >= 1, calls
    for call in calls:
        assert call.function.name == "get_weather", call
        jsonschema.validate(json.loads(call.function.arguments), WEATHER)


@pytest.mark.parametrize("tool_choice", ["required", "named"])
def test_forced_tool_call_arguments_validate_against_the_tool_schema(sdk, ends_after_the_call, tool_choice):
    """tool_choice "required" or a named tool, through the gateway with the official SDK: the
    engine decodes the call under the tool's schema (serving_tool_arguments_strict), so even random
    weights return arguments that parse and validate. Without it vLLM 0.32 answered "false" and
    SGLang 0.5.23 "Infinity"."""
    resp = weather_call(sdk, ends_after_the_call, "required" if tool_choice == "required" else NAMED)
    choice = resp.choices[0]
    print("forced tool call %s (%s): finish_reason %s, %s"
          % (tool_choice, ENGINE, choice.finish_reason, choice.message.tool_calls))
    assert choice.finish_reason in ("tool_calls", "stop"), choice
    assert_weather_call(choice.message.tool_calls)


def test_streamed_forced_tool_call_assembles_to_the_same_call(sdk, ends_after_the_call):
    """The same forced call streamed: the deltas of each call index assemble to the name and the
    arguments the unstreamed answer has (greedy decoding), and the last chunk says why it ended."""
    whole = weather_call(sdk, ends_after_the_call, "required").choices[0].message.tool_calls
    calls, finish = {}, None
    for chunk in weather_call(sdk, ends_after_the_call, "required", stream=True):
        if not chunk.choices:
            continue
        finish = chunk.choices[0].finish_reason or finish
        for delta in chunk.choices[0].delta.tool_calls or []:
            call = calls.setdefault(delta.index, {"name": "", "arguments": ""})
            if delta.function and delta.function.name:
                call["name"] += delta.function.name
            if delta.function and delta.function.arguments:
                call["arguments"] += delta.function.arguments
    print("streamed forced tool call (%s): finish_reason %s, %s" % (ENGINE, finish, calls))
    assert finish in ("tool_calls", "stop"), finish
    assert [(c["name"], json.loads(c["arguments"])) for _, c in sorted(calls.items())] == \
        [(c.function.name, json.loads(c.function.arguments)) for c in whole]


def test_openai_sdk_tools_with_auto_tool_choice_through_the_gateway(sdk, no_whitespace):
    """tools with tool_choice "auto" (the engines answer 400 without a tool-call parser): the model
    chooses. A call it makes validates against the tool's schema; an answer without one ran to
    max_tokens (its text, or nothing where a call it began was cut: the engines drop unfinished
    call markup)."""
    resp = sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Weather in Paris?"}],
                                       tools=TOOLS, tool_choice="auto", max_tokens=64, temperature=0,
                                       logit_bias=no_whitespace)
    choice = resp.choices[0]
    print("tools with tool_choice=auto through the gateway (%s): finish_reason %s, tool_calls %s, content %r"
          % (ENGINE, choice.finish_reason, choice.message.tool_calls, choice.message.content))
    if choice.message.tool_calls:
        assert choice.finish_reason == "tool_calls", choice
        assert_weather_call(choice.message.tool_calls)
    else:
        assert choice.finish_reason == "length" and resp.usage.completion_tokens == 64, choice


def test_json_object_answer_is_json(sdk, no_whitespace):
    """response_format json_object: the answer parses as a JSON object."""
    resp = sdk.chat.completions.create(model=MODEL, messages=[{"role": "user", "content": "Answer in JSON."}],
                                       response_format={"type": "json_object"}, max_tokens=64, temperature=0,
                                       logit_bias=no_whitespace)
    choice = resp.choices[0]
    print("json_object through the gateway (%s): %r, finish_reason %s"
          % (ENGINE, choice.message.content, choice.finish_reason))
    assert choice.finish_reason == "stop", choice
    assert isinstance(json.loads(choice.message.content), dict), choice.message.content


def test_streamed_usage_is_reported_for_billing(sdk):
    """stream_options.include_usage: the stream ends with a chunk of no choices that counts the
    prompt and the completion, as billing reads them."""
    chunks = list(sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Count to five."}], max_tokens=6, temperature=0,
        stream=True, stream_options={"include_usage": True}))
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None, last
    assert last.usage.completion_tokens == 6 and last.usage.prompt_tokens > 0, last.usage
    assert last.usage.total_tokens == last.usage.prompt_tokens + last.usage.completion_tokens
    assert all(c.usage is None for c in chunks[:-1])


def test_openai_sdk_json_schema_answer_is_valid_json_of_the_schema(sdk, no_whitespace):
    """response_format json_schema through the gateway: the engine's grammar backend
    (serving_structured_output) holds even random weights to the schema, so the answer parses and
    conforms; a model left to itself would not."""
    schema = {"type": "object", "additionalProperties": False, "required": ["city", "days"],
              "properties": {"city": {"type": "string", "enum": ["Paris", "Rome", "Oslo"]},
                             "days": {"type": "integer", "minimum": 1, "maximum": 9}}}
    resp = sdk.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "Which city, for how many days? Answer in JSON."}],
        response_format={"type": "json_schema", "json_schema": {"name": "trip", "strict": True, "schema": schema}},
        max_tokens=120, temperature=0, logit_bias=no_whitespace)
    import jsonschema
    choice = resp.choices[0]
    assert choice.finish_reason == "stop", choice
    jsonschema.validate(json.loads(choice.message.content), schema)
    print("json_schema through the gateway (%s): %s in %d tokens" % (ENGINE, choice.message.content,
                                                                     resp.usage.completion_tokens))


def greedy_answer(sdk, model):
    # (text, not logprobs: vLLM's CPU engine compiles its log-prob gather with a C++ compiler, which
    # the test host has not, and its engine core dies on the first request for them)
    resp = sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": "Say something."}],
                                       max_tokens=12, temperature=0)
    assert resp.model == model, resp.model
    return resp.choices[0].message.content


def test_lora_adapters_answer_by_name_through_the_gateway(sdk):
    """Each adapter of serving_lora_adapters answers under its own name, and is applied: with greedy
    decoding its answer differs from the base model's and from the other adapter's."""
    if not ADAPTERS:
        pytest.skip("no adapters served by name on %s here" % ENGINE)
    listed = sorted(m.id for m in sdk.models.list().data)
    assert listed == sorted([MODEL] + ADAPTERS), listed
    answers = dict((name, greedy_answer(sdk, name)) for name in [MODEL] + ADAPTERS)
    print("greedy answers by served name (%s): %s" % (ENGINE, answers))
    assert len(set(answers.values())) == len(answers), answers
    # the same name twice: the same answer (the difference is the adapter, not chance)
    assert greedy_answer(sdk, ADAPTERS[0]) == answers[ADAPTERS[0]]


def test_unknown_model_is_404_at_the_gateway(sdk, host):
    """A model no engine behind the gateway serves: 404 from the gateway itself (the OpenAI error
    shape the SDK raises NotFoundError for), logged without an upstream."""
    import openai
    name = "no-such-model-%d" % os.getpid()
    with pytest.raises(openai.NotFoundError) as err:
        sdk.chat.completions.create(model=name, messages=[{"role": "user", "content": "hi"}], max_tokens=2)
    assert err.value.body["code"] == "model_not_found" and name in err.value.body["message"], err.value.body
    for dummy in range(20):
        lines = [json.loads(x) for x in host.file(ACCESS_LOG).content_string.splitlines() if name in x]
        if lines:
            break
        time.sleep(0.5)
    assert lines and lines[-1]["status"] == 404 and lines[-1]["upstream"] == "", lines


@pytest.mark.parametrize("kind", ["byte order mark", "NaN"])
def test_a_body_the_gateway_cannot_read_is_400_and_reaches_no_engine(host, client, host_ip, kind):
    """A JSON body njs's parser refuses (a UTF-8 byte order mark before it, a NaN in it) is answered
    400 by the gateway: forwarded unread, it would reach the engine with the priority the client
    wrote and without the routing by model."""
    name = sorted(KEYS)[0]
    marker = "unreadable-%d-%s" % (os.getpid(), kind.replace(" ", "-"))
    if kind == "NaN":
        raw = json.dumps(chat("hi", priority=float("nan"), user=marker)).encode()
    else:
        raw = b"\xef\xbb\xbf" + json.dumps(chat("hi", priority=-1000, user=marker)).encode()
    client.check_output("echo %s | base64 -d > /tmp/gw-unreadable.json" % base64.b64encode(raw).decode())
    status, _, text = gw(client, host_ip, "/v1/chat/completions", method="POST", key=KEYS[name],
                         raw_body="/tmp/gw-unreadable.json", headers=["X-User-ID: %s" % marker])
    assert status == 400 and json.loads(text)["error"]["code"] == "invalid_json", (status, text)
    for dummy in range(20):
        lines = [json.loads(x) for x in host.file(ACCESS_LOG).content_string.splitlines() if marker in x]
        if lines:
            break
        time.sleep(0.5)
    assert lines and lines[-1]["status"] == 400 and lines[-1]["upstream"] == "" and lines[-1]["priority"] == "", lines


def test_client_priority_is_the_gateways_not_the_clients(host, client, host_ip):
    """serving_priority_scheduling with a client's priority in gateway_api_keys: the gateway writes
    each client's priority into its requests over whatever the client sent. A priority the engine
    itself refuses ("urgent" is not an integer) passes the gateway, and the access log shows the
    priority each request got."""
    assert PRIORITIES, "the scenario gives a client a priority"
    refused = host.run(" ".join(shlex.quote(c) for c in [
        "curl", "-sS", "-m", "60", "-o", "/dev/null", "-w", "%{http_code}", "-H", "Authorization: Bearer %s" % ENGINE_KEY,
        "-H", "Content-Type: application/json", "--data-binary", json.dumps(chat("hi", priority="urgent")),
        "http://%s/v1/chat/completions" % LISTEN]))
    assert refused.stdout.strip() in ("400", "422"), refused.stdout
    for name in sorted(KEYS):
        marker = "prio-%s-%d" % (name, os.getpid())
        status, _, text = gw(client, host_ip, "/v1/chat/completions", method="POST", key=KEYS[name],
                             body=chat("hi", priority="urgent", user=marker))
        assert status == 200, (name, text)
    for dummy in range(20):
        recent = [json.loads(x) for x in host.file(ACCESS_LOG).content_string.splitlines()[-20:]]
        got = dict((line["client"], line["priority"]) for line in recent if line["status"] == 200)
        if set(got) >= set(KEYS):
            break
        time.sleep(0.5)
    print("priority per client in the access log (%s): %s" % (ENGINE, got))
    assert got == dict((name, str(PRIORITIES.get(name, 0))) for name in KEYS), got


LIVE_INCLUDES = "/etc/nginx/conf.d/llmops-gateway.conf /etc/nginx/llmops/*.conf /etc/nginx/llmops/gateway.js /etc/nginx/llmops/clients.map"


@pytest.mark.engine_independent
def test_includes_nginx_refuses_are_never_put_in_place(host, client, host_ip):
    """An access log in a folder that does not exist passes the controller's checks, and nginx
    refuses it: the run stops at the check of the staged includes, and the live includes, nginx's
    own check of them and the serving gateway are as they were (a restart would start)."""
    before = host.check_output("sha256sum %s" % LIVE_INCLUDES)
    rc, out = playbook("--tags", "gateway", extra={"gateway_access_log": "/var/log/nginx-missing/llmops.access.log"})
    assert rc != 0 and "nginx refused the staged includes: nothing was put in place" in out, out[-3000:]
    assert "/var/log/nginx-missing/llmops.access.log" in out, out[-3000:]
    assert host.check_output("sha256sum %s" % LIVE_INCLUDES) == before
    assert host.run("nginx -t -q").rc == 0
    name = sorted(KEYS)[0]
    status, dummy, text = gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat("Still there?"), key=KEYS[name])
    assert status == 200, text


@pytest.mark.engine_independent
def test_a_cordoned_host_leaves_the_gateway_until_the_cordon_is_lifted(host, client, host_ip):
    """serving_cordoned on the only engine (its pool allowed to stop serving: budget 0): the next run
    holds its server line down, and the gateway answers no engine; without the cordon the next run
    puts it back. The engine itself keeps running throughout. The rollout role's text file for
    node_exporter says the host is cordoned, so its engine stopped for maintenance pages no one
    (LLMEngineDown; promtool proves the rule), and says so no more once the cordon is lifted."""
    pid = host.check_output("systemctl show -p MainPID --value llmops-%s.service" % ENGINE)
    name = sorted(KEYS)[0]
    # node_exporter's textfile folder, as its package makes it (the test host has no node_exporter)
    textfile = "/var/lib/prometheus/node-exporter"
    made = host.run("test -d %s" % textfile).rc != 0
    host.check_output("mkdir -p %s" % textfile)
    try:
        rc, out = playbook("--tags", "gateway,rollout",
                           extra={"serving_cordoned": True, "serving_rollout_min_available": 0})
        assert rc == 0, out[-3000:]
        assert "(cordoned)" in host.check_output("cat /etc/nginx/llmops/upstream.d/*.conf")
        assert "llmops_host_cordoned 1" in host.check_output("cat %s/llmops-rollout.prom" % textfile)
        status, dummy, text = gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat("Anyone?"),
                                 key=KEYS[name])
        assert status == 502 and "no engine available" in text, (status, text)
        rc, out = playbook("--tags", "gateway,rollout")
        assert rc == 0, out[-3000:]
        assert " down;" not in host.check_output("cat /etc/nginx/llmops/upstream.d/*.conf")
        assert "llmops_host_cordoned 0" in host.check_output("cat %s/llmops-rollout.prom" % textfile)
    finally:
        if made:
            host.run("rm -rf %s" % textfile)
    status, dummy, text = gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat("Back?"), key=KEYS[name])
    assert status == 200, text
    assert host.check_output("systemctl show -p MainPID --value llmops-%s.service" % ENGINE) == pid


@pytest.mark.parametrize("path", ["/tokenize", "/v1/embeddings", "/v1/load_lora_adapter", "/docs", "/"])
def test_routes_outside_the_list_are_not_found(client, host_ip, path):
    status, _, _ = gw(client, host_ip, path, key=next(iter(KEYS.values())))
    assert status == 404


def test_over_the_per_user_rate_gets_429(client, host_ip):
    """Scenario sets 1r/m with burst 3 per X-User-ID: the 5th request in a row cannot pass."""
    key, user = next(iter(KEYS.values())), "rate-test-%s" % uuid.uuid4().hex
    def one(uid):
        return gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat("hi", max_tokens=1),
                  key=key, headers=["X-User-ID: %s" % uid])[0]
    statuses = [one(user) for _ in range(6)]
    assert statuses[0] == 200
    # A slow host may let a minute pass during the six (1r/m refills one); the bucket must still
    # have run dry at least once.
    assert 429 in statuses[3:] and set(statuses) == {200, 429}, statuses
    assert set(statuses) <= {200, 429}
    # Another user of the same client is not affected.
    assert one("other-%s" % user) == 200


def test_oversized_body_gets_413(client, host_ip):
    client.check_output("python3 -c \"import json; print(json.dumps({'model': '%s', 'messages': "
                        "[{'role': 'user', 'content': 'a' * 200000}]}))\" > /tmp/big.json" % MODEL)
    status, _, text = gw(client, host_ip, "/v1/chat/completions", method="POST", raw_body="/tmp/big.json",
                         key=next(iter(KEYS.values())))
    assert status == 413, text


@pytest.mark.parametrize("path", ["/metrics", "/health"])
def test_internal_routes_refused_from_outside(client, host_ip, path):
    status, _, _ = gw(client, host_ip, path)
    assert status == 403


def test_metrics_answer_on_the_gateway_host(host):
    out = host.check_output("curl -sS -k -m 30 https://127.0.0.1:%s/metrics" % PORT)
    # the deployed engine's own series, not the other engine's
    assert re.search(r"^%s:\w+" % ENGINE, out, re.M), out[:500]
    assert not re.search(r"^%s:\w+" % ("sglang" if ENGINE == "vllm" else "vllm"), out, re.M)


def test_engine_port_unreachable_from_another_host(client, host_ip):
    port = LISTEN.rsplit(":", 1)[1]
    res = client.run("curl -sS -m 10 -o /dev/null -w '%%{http_code}' http://%s:%s/health" % (host_ip, port))
    assert res.rc != 0, res.stdout  # 7: connection refused
    # ...while the same host is reachable through the gateway.
    status, _, _ = gw(client, host_ip, "/v1/models", key=next(iter(KEYS.values())))
    assert status == 200


def test_template_syntax_and_markup_come_back_as_data(host, client, host_ip):
    status, head, text = gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat(INJECTION),
                            key=next(iter(KEYS.values())))
    assert status == 200, text
    assert "application/json" in head.lower()
    body = json.loads(text)
    # The engine rendered the chat template once, with the prompt as text inside it.
    tokens = engine(host, "/tokenize", {"model": MODEL, "messages": [{"role": "user", "content": INJECTION}],
                                        "add_generation_prompt": True})["tokens"]
    # the engines name the decoded text differently (vLLM's DetokenizeResponse.prompt, SGLang's .text)
    prompt = engine(host, "/detokenize", {"model": MODEL, "tokens": tokens})[{"vllm": "prompt", "sglang": "text"}[ENGINE]]
    assert INJECTION in prompt
    assert "49" not in prompt
    assert body["usage"]["prompt_tokens"] == len(tokens)


def test_access_log_has_clients_but_no_keys_or_prompts(host, client, host_ip):
    # this test's own traffic: a completion for each client, with a prompt the log must not hold
    prompt = "access-log probe %d: who are you?" % os.getpid()
    for name in sorted(KEYS):
        status, _, text = gw(client, host_ip, "/v1/chat/completions", method="POST", body=chat(prompt), key=KEYS[name])
        assert status == 200, text
    # nginx writes a request's line in its log phase, after the response: allow it a moment
    for dummy in range(20):
        log = host.file("/var/log/nginx/llmops-gateway.access.log").content_string
        recent = [json.loads(line) for line in log.splitlines() if line.strip()][-4 * len(KEYS):]
        if {line["client"] for line in recent if line.get("status") == 200} >= set(KEYS):
            break
        time.sleep(0.5)
    assert {line["client"] for line in recent if line.get("status") == 200} >= set(KEYS), recent
    for secret in list(KEYS.values()) + [ENGINE_KEY, prompt, "access-log probe"]:
        assert secret not in log


def test_client_keys_are_not_stored_in_clear(host):
    for key in KEYS.values():
        assert host.run("grep -rlF %s /etc/nginx" % shlex.quote(key)).stdout == ""
    assert host.file("/etc/nginx/llmops/clients.map").mode == 0o600
    assert host.file("/etc/nginx/llmops/gateway.key").mode == 0o600


@pytest.mark.parametrize("unit", ["llmops-%s.service" % ENGINE, "nginx.service"])
def test_units_are_hardened(host, unit):
    out = host.check_output("systemd-analyze security --no-pager %s" % unit)
    score = float(re.search(r"Overall exposure level for \S+: ([0-9.]+)", out).group(1))
    print("%s: systemd-analyze security %.1f" % (unit, score))
    assert score <= 3.0, out


# ---------------------------------------------------------------------------------------------
# every route the engine registers, from outside; the TLS configuration and open ports, by scanners
# ---------------------------------------------------------------------------------------------
ALLOWED = set(os.environ.get("LLMOPS_GATEWAY_ROUTES", "/v1/chat/completions,/v1/completions").split(",")) | {"/v1/models"}
INTERNAL = {"/health", "/metrics"}
PROBE = r"""
import json, socket, ssl, sys, urllib.error, urllib.request
gateway, name, port, direct, key, paths = json.loads(sys.argv[1])
ctx = ssl.create_default_context(cafile="/tmp/gateway.crt")
def ask(url, method, **kw):
    req = urllib.request.Request(url, method=method, data=b"{}" if method == "POST" else None,
                                 headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(req, timeout=20, **kw).status
    except urllib.error.HTTPError as e:
        return e.code
    except (urllib.error.URLError, socket.timeout, ConnectionError, OSError):
        return 0
# the certificate names the gateway host: connect to its address with that name
real = socket.getaddrinfo
socket.getaddrinfo = lambda host, *a, **k: real(gateway if host == name else host, *a, **k)
out = {}
for path, method in paths:
    out[path] = [ask("https://%s:%s%s" % (name, port, path), method, context=ctx), ask("http://%s%s" % (direct, path), method)]
print(json.dumps(out))
"""


def engine_routes(host):
    """(path, method) of every route the running engine's own app registers (its OpenAPI schema),
    with path parameters filled in, plus the ones FastAPI leaves out of the schema."""
    schema = json.loads(host.check_output("curl -sS -m 30 -H 'Authorization: Bearer %s' http://%s/openapi.json"
                                          % (ENGINE_KEY, LISTEN)))
    routes = {}
    for path, methods in schema["paths"].items():
        concrete = re.sub(r"\{[^}]+\}", "x", path)
        routes[concrete] = "GET" if "get" in methods else sorted(methods)[0].upper()
    for path in ("/metrics", "/health", "/health_generate", "/docs", "/openapi.json"):
        routes.setdefault(path, "GET")
    return sorted(routes.items())


def test_every_engine_route_is_closed_except_the_allowed_ones(host, client, host_ip):
    routes = engine_routes(host)
    assert len(routes) > 10, routes
    port = LISTEN.rsplit(":", 1)[1]
    key = next(iter(KEYS.values()))
    seen = json.loads(client.check_output("python3 -c %s %s" % (shlex.quote(PROBE), shlex.quote(json.dumps(
        [host_ip, GATEWAY_NAME, PORT, "%s:%s" % (host_ip, port), key, routes])))))
    print("%s %s: %d routes; through the gateway / straight to the engine port (0 = no connection)"
          % (ENGINE, LISTEN, len(routes)))
    for path, (via_gateway, direct) in sorted(seen.items()):
        print("  %-40s %3d  %3d" % (path, via_gateway, direct))
    wrong = {}
    for path, (via_gateway, direct) in seen.items():
        expected_open = path in ALLOWED
        if direct != 0:
            wrong[path] = "the engine port answered %d from another host" % direct
        elif path in INTERNAL and via_gateway != 403:
            wrong[path] = "internal route answered %d, not 403, from outside" % via_gateway
        elif not expected_open and path not in INTERNAL and via_gateway != 404:
            wrong[path] = "not on the route list, but answered %d" % via_gateway
        elif expected_open and via_gateway in (0, 404):
            wrong[path] = "on the route list, but answered %d" % via_gateway
    assert not wrong, wrong


def test_sslscan_finds_only_modern_tls(client, host_ip):
    out = client.check_output("sslscan --no-colour --xml=/tmp/sslscan.xml %s:%s >/dev/null; cat /tmp/sslscan.xml"
                              % (host_ip, PORT))
    protocols = dict(re.findall(r'<protocol type="(?:ssl|tls)" version="([0-9.]+)" enabled="([01])"', out))
    ciphers = re.findall(r'<cipher status="(?:preferred|accepted)" sslversion="([^"]+)" bits="\d+" cipher="([^"]+)"', out)
    print("sslscan %s:%s: protocols %s; ciphers %s" % (host_ip, PORT, protocols, sorted(set(ciphers))))
    assert ciphers, out[:2000]
    enabled = sorted(v for v, on in protocols.items() if on == "1")
    assert enabled == ["1.2", "1.3"], protocols
    for version, cipher in ciphers:
        if version == "TLSv1.3":
            continue
        assert cipher.startswith(("ECDHE-", "DHE-")), "static RSA key exchange: %s" % cipher
        assert "GCM" in cipher or "CHACHA20" in cipher, "not an AEAD suite (CBC): %s" % cipher
        assert not cipher.endswith("-SHA"), "SHA-1 MAC: %s" % cipher


def test_a_port_scan_finds_only_the_gateway(host, client, host_ip):
    out = client.check_output("nmap -sT -Pn -n -p- --min-rate 5000 -T4 --open -oG - %s" % host_ip)
    open_ports = sorted(int(p) for p in re.findall(r"(\d+)/open/tcp", out))
    # what listens beyond loopback on the host (the engine's internal ports among them)
    listening = sorted(set(int(a.rsplit(":", 1)[1]) for a in host.check_output("ss -Hltn | awk '{print $4}'").split()
                           if not a.startswith(("127.", "[::1]"))))
    print("nmap -sT -p- %s: open %s; listening beyond loopback there: %s" % (host_ip, open_ports, listening))
    assert open_ports == [int(PORT)], out
