#!/usr/bin/env python3
"""Self-test of fake_llm_server.py (standard library only).

Starts the server on port 0, then exercises the three wire formats (streamed and not), auth and
model errors, every fault kind, random faults, the control endpoints, keep-alive, the request
log and clean shutdown. Prints one summary line and exits 0, or prints FAIL: ... and exits 1.

    python3 tests/fake_llm/selftest.py
"""

import http.client
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "fake_llm_server.py")
KEY = "sk-selftest-123"
MODELS = ["gpt-test", "claude-test", "gemini-test"]
REPLY = "Sure.\n```python\nclass ModelNew(torch.nn.Module):\n    pass\n```\n"  # 58 chars

# urllib honours http_proxy & co.; the server is local, so never go through a proxy.
OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class Failure(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failure(message)


def tokens(text):
    return int(math.ceil(len(text) / 4.0))


class Server:
    """The server as a subprocess; `port` once it is listening."""

    def __init__(self, tmp, *args):
        self.port_file = os.path.join(tmp, "port-%d" % id(self))
        self.stderr = open(os.path.join(tmp, "stderr-%d" % id(self)), "w+")
        self.proc = subprocess.Popen([sys.executable, SERVER, "--port", "0", "--port-file", self.port_file]
                                     + list(args), stdout=subprocess.PIPE, stderr=self.stderr,
                                     universal_newlines=True)
        deadline = time.time() + 10
        while not os.path.exists(self.port_file):
            if self.proc.poll() is not None or time.time() > deadline:
                raise Failure("server did not start: %s" % self.stderr_text())
            time.sleep(0.02)
        with open(self.port_file) as f:
            self.port = int(f.read())
        line = self.proc.stdout.readline()
        check(line == "LISTENING %d\n" % self.port, "stdout said %r, port file %d" % (line, self.port))

    def stderr_text(self):
        self.stderr.flush()
        self.stderr.seek(0)
        return self.stderr.read()[-2000:]

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def stop(self):
        """SIGTERM; returns the exit code (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                return self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                return None
        return self.proc.returncode


# ---- HTTP helpers ----

def post(srv, path, body, headers=None, timeout=10):
    """POST JSON; returns (status, headers, body bytes). HTTP errors are returned, not raised."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode("utf-8")
    req = urllib.request.Request(srv.url(path), data=data, method="POST",
                                 headers=dict({"Content-Type": "application/json"}, **(headers or {})))
    try:
        with OPENER.open(req, timeout=timeout) as resp:
            return resp.status, resp.headers, resp.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def get_json(srv, path):
    with OPENER.open(srv.url(path), timeout=10) as resp:
        return json.loads(resp.read().decode("utf-8"))


def control(srv, path, body):
    status, _, data = post(srv, path, body)
    check(status == 200, "%s -> %d %r" % (path, status, data))
    return json.loads(data.decode("utf-8"))


def set_faults(srv, queue=None, **kw):
    body = dict(kw)
    if queue is not None:
        body["queue"] = queue
    return control(srv, "/_control/faults", body)


def sse_events(data, crlf=False):
    """Splits an SSE body into [(event name or None, data string)]."""
    text = data.decode("utf-8")
    sep = "\r\n\r\n" if crlf else "\n\n"
    check(text.endswith(sep), "SSE body does not end with %r: %r" % (sep, text[-40:]))
    if crlf:
        check("\n" not in text.replace("\r\n", ""), "Gemini stream has bare LF line ends")
    out = []
    for block in text[:-len(sep)].split(sep):
        name, datas = None, []
        for line in block.splitlines():
            if line.startswith("event: "):
                name = line[len("event: "):]
            elif line.startswith("data: "):
                datas.append(line[len("data: "):])
        out.append((name, "\n".join(datas)))
    return out


# ---- one request per format ----

OPENAI = "/v1/chat/completions"
ANTHROPIC = "/v1/messages"
SYSTEM = "You write kernels."
PROMPT = "Make it faster please."


def gemini_path(model="gemini-test", stream=False):
    if stream:
        return "/v1beta/models/%s:streamGenerateContent?alt=sse" % model
    return "/v1beta/models/%s:generateContent" % model


def request(fmt, stream=False, key=KEY, model=None, thinking=False, extra_headers=None, query=""):
    """(path, body, headers) of a typical kiln request in format `fmt`."""
    if fmt == "openai":
        body = {"model": model or "gpt-test", "temperature": 0.5, "max_completion_tokens": 500,
                "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": PROMPT}],
                "stop": ["</end>"]}
        if stream:
            body.update(stream=True, stream_options={"include_usage": True})
        if thinking:
            body["reasoning_effort"] = "high"
        path, headers = OPENAI, {"Authorization": "Bearer " + key}
    elif fmt == "anthropic":
        body = {"model": model or "claude-test", "max_tokens": 500, "system": SYSTEM,
                "messages": [{"role": "user", "content": PROMPT}], "temperature": 1, "stream": stream}
        if thinking:
            body["thinking"] = {"type": "enabled", "budget_tokens": 1024}
        path, headers = ANTHROPIC, {"x-api-key": key, "anthropic-version": "2023-06-01"}
    else:
        body = {"systemInstruction": {"parts": [{"text": SYSTEM}]},
                "contents": [{"role": "user", "parts": [{"text": PROMPT}]}],
                "generationConfig": {"temperature": 0.5, "maxOutputTokens": 500}}
        if thinking:
            body["generationConfig"]["thinkingConfig"] = {"thinkingBudget": 1024}
        path, headers = gemini_path(model or "gemini-test", stream), {"x-goog-api-key": key}
    headers.update(extra_headers or {})
    if query:
        path += ("&" if "?" in path else "?") + query
    return path, body, headers


def call(srv, fmt, **kw):
    path, body, headers = request(fmt, **kw)
    return post(srv, path, body, headers)


def parse_reply(fmt, stream, data):
    """(text, thinking text, input tokens, output tokens, end marker seen) of a 200 reply."""
    if not stream:
        j = json.loads(data.decode("utf-8"))
        if fmt == "openai":
            check(j["object"] == "chat.completion" and j["choices"][0]["finish_reason"] == "stop", "openai body %r" % j)
            u = j["usage"]
            check(u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"], "openai total_tokens")
            return (j["choices"][0]["message"]["content"], u["completion_tokens_details"]["reasoning_tokens"],
                    u["prompt_tokens"], u["completion_tokens"], True)
        if fmt == "anthropic":
            check(j["type"] == "message" and j["stop_reason"] == "end_turn", "anthropic body %r" % j)
            text = "".join(b["text"] for b in j["content"] if b["type"] == "text")
            think = "".join(b["thinking"] for b in j["content"] if b["type"] == "thinking")
            if think:
                check(j["content"][0]["type"] == "thinking" and j["content"][0]["signature"], "thinking block first")
            return text, think, j["usage"]["input_tokens"], j["usage"]["output_tokens"], True
        cand = j["candidates"][0]
        check(cand["finishReason"] == "STOP", "gemini finishReason")
        parts = cand["content"]["parts"]
        u = j["usageMetadata"]
        text = "".join(p["text"] for p in parts if not p.get("thought"))
        think = "".join(p["text"] for p in parts if p.get("thought"))
        if think:
            check(parts[0].get("thought") is True, "thought part first")
        check(u["totalTokenCount"] == u["promptTokenCount"] + u["candidatesTokenCount"]
              + u.get("thoughtsTokenCount", 0), "gemini totalTokenCount")
        return text, think, u["promptTokenCount"], u["candidatesTokenCount"] + u.get("thoughtsTokenCount", 0), True

    events = sse_events(data, crlf=(fmt == "gemini"))
    text, think, tin, tout, done = "", "", None, None, False
    if fmt == "openai":
        for _, d in events:
            check(not done, "openai data after [DONE]")
            if d == "[DONE]":
                done = True
                continue
            c = json.loads(d)
            for ch in c["choices"]:
                text += ch["delta"].get("content") or ""
            if c.get("usage"):
                check(c["choices"] == [], "openai usage chunk must have empty choices")
                tin, tout = c["usage"]["prompt_tokens"], c["usage"]["completion_tokens"]
                think = c["usage"]["completion_tokens_details"]["reasoning_tokens"]
        return text, think, tin, tout, done
    if fmt == "anthropic":
        names = [n for n, _ in events]
        check(names[0] == "message_start" and names[-1] == "message_stop", "anthropic event order %r" % names)
        check("ping" in names, "anthropic stream without a ping")
        for n, d in events:
            j = json.loads(d)
            check(j["type"] == n, "anthropic event name %s vs type %s" % (n, j["type"]))
            if n == "message_start":
                tin = j["message"]["usage"]["input_tokens"]
            elif n == "content_block_delta":
                if j["delta"]["type"] == "text_delta":
                    text += j["delta"]["text"]
                elif j["delta"]["type"] == "thinking_delta":
                    think += j["delta"]["thinking"]
            elif n == "message_delta":
                check(j["delta"]["stop_reason"] == "end_turn", "anthropic stop_reason")
                tout = j["usage"]["output_tokens"]
            elif n == "message_stop":
                done = True
        return text, think, tin, tout, done
    for _, d in events:
        j = json.loads(d)
        for p in j["candidates"][0]["content"]["parts"]:
            if p.get("thought"):
                think += p["text"]
            else:
                text += p["text"]
        if j["candidates"][0].get("finishReason"):
            check(not done, "two gemini chunks with finishReason")
            done = True
            u = j["usageMetadata"]
            tin, tout = u["promptTokenCount"], u["candidatesTokenCount"] + u.get("thoughtsTokenCount", 0)
    return text, think, tin, tout, done


# ---- the tests ----

def test_formats(srv):
    """Each format, streamed and not, with and without thinking: text, tokens and markers."""
    prompt_tokens = tokens(SYSTEM + PROMPT)
    for fmt in ("openai", "anthropic", "gemini"):
        for stream in (False, True):
            for thinking in (False, True):
                status, headers, data = call(srv, fmt, stream=stream, thinking=thinking)
                what = "%s stream=%s thinking=%s" % (fmt, stream, thinking)
                check(status == 200, "%s: status %d %r" % (what, status, data[:200]))
                ctype = headers.get("Content-Type", "")
                check(ctype.startswith("text/event-stream" if stream else "application/json"),
                      "%s: Content-Type %s" % (what, ctype))
                text, think, tin, tout, done = parse_reply(fmt, stream, data)
                check(text == REPLY, "%s: text %r" % (what, text))
                check(done, "%s: no end marker" % what)
                check(tin == prompt_tokens, "%s: input tokens %r, want %d" % (what, tin, prompt_tokens))
                if fmt == "openai":
                    think_tokens = think  # OpenAI reports only the count
                    check((think_tokens > 0) == thinking, "%s: reasoning_tokens %r" % (what, think_tokens))
                else:
                    check(bool(think) == thinking, "%s: thinking text %r" % (what, think))
                    think_tokens = tokens(think)
                check(tout == tokens(REPLY) + think_tokens, "%s: output tokens %r" % (what, tout))


def test_errors(srv):
    """Wrong key, unknown model, missing anthropic-version, key in a Gemini URL, bad JSON."""
    want = {
        "openai": {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                             "code": "invalid_api_key"}},
        "anthropic": {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
        "gemini": {"error": {"code": 401, "message": "API key not valid", "status": "UNAUTHENTICATED"}},
    }
    for fmt in ("openai", "anthropic", "gemini"):
        for stream in (False, True):
            status, _, data = call(srv, fmt, stream=stream, key="sk-wrong")
            check(status == 401, "%s wrong key: status %d" % (fmt, status))
            check(json.loads(data.decode("utf-8")) == want[fmt], "%s wrong key body %r" % (fmt, data))
        status, _, data = call(srv, fmt, model="no-such-model")
        j = json.loads(data.decode("utf-8"))
        check(status == 404, "%s unknown model: status %d" % (fmt, status))
        shape_ok = {"openai": lambda: j["error"]["code"] == "model_not_found",
                    "anthropic": lambda: j["type"] == "error" and j["error"]["type"] == "not_found_error",
                    "gemini": lambda: j["error"]["status"] == "NOT_FOUND"}[fmt]()
        check(shape_ok, "%s unknown model body %r" % (fmt, j))
        path, _, headers = request(fmt)
        status, _, data = post(srv, path, b"{not json", headers)
        check(status == 400, "%s bad JSON: status %d" % (fmt, status))

    path, body, headers = request("anthropic")
    del headers["anthropic-version"]
    status, _, data = post(srv, path, body, headers)
    check(status == 400 and json.loads(data.decode("utf-8"))["error"]["type"] == "invalid_request_error",
          "missing anthropic-version: %d %r" % (status, data))

    before = get_json(srv, "/_stats")["key_in_url"]
    for stream in (False, True):
        status, _, data = call(srv, "gemini", stream=stream, query="key=" + KEY)
        check(status == 400 and json.loads(data.decode("utf-8"))["error"]["status"] == "INVALID_ARGUMENT",
              "gemini key= in URL: %d %r" % (status, data))
    status, _, _ = call(srv, "gemini", key="", query="key=" + KEY)
    check(status == 400, "gemini key= in URL without a header: %d" % status)
    after = get_json(srv, "/_stats")["key_in_url"]
    check(after - before == 3, "key_in_url went %d -> %d" % (before, after))

    status, _, _ = post(srv, "/v1/nowhere", {"x": 1}, {"Authorization": "Bearer " + KEY})
    check(status == 404, "unknown path: %d" % status)


def read_all_or_incomplete(fmt, stream, srv):
    """Sends one request and reads it with http.client; returns (status, bytes, incomplete?)."""
    path, body, headers = request(fmt, stream=stream)
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    try:
        conn.request("POST", path, json.dumps(body), dict(headers, **{"Content-Type": "application/json"}))
        resp = conn.getresponse()
        try:
            return resp.status, resp.read(), False
        except http.client.IncompleteRead as e:
            return resp.status, e.partial, True
    finally:
        conn.close()


def test_faults(srv):
    """Every fault kind once from the queue (per format where the shape differs)."""
    for fmt in ("openai", "anthropic", "gemini"):
        set_faults(srv, ["429@2", "429@0", "500", "502", "503", "529", "401", "403", "404", "garbage", "ok"])
        for want, retry in (("429", "2"), ("429", "0")):
            status, headers, data = call(srv, fmt)
            check(status == 429 and headers.get("Retry-After") == retry,
                  "%s 429: status %d Retry-After %r" % (fmt, status, headers.get("Retry-After")))
            j = json.loads(data.decode("utf-8"))
            check({"openai": lambda: j["error"]["code"] == "rate_limit_exceeded",
                   "anthropic": lambda: j["error"]["type"] == "rate_limit_error",
                   "gemini": lambda: j["error"]["status"] == "RESOURCE_EXHAUSTED"}[fmt](),
                  "%s 429 body %r" % (fmt, j))
        for code in (500, 502, 503, 529, 401, 403, 404):
            status, _, data = call(srv, fmt, stream=True)
            check(status == code, "%s fault %d: got %d" % (fmt, code, status))
            j = json.loads(data.decode("utf-8"))  # provider-shaped JSON even for a streamed request
            check("error" in j, "%s fault %d body %r" % (fmt, code, j))
        if fmt == "anthropic":
            check(j["error"]["type"] == "not_found_error", "anthropic 404 type")
        status, _, data = call(srv, fmt)
        check(status == 200 and data == b"<html>upstream error</html>", "%s garbage: %d %r" % (fmt, status, data))
        status, _, data = call(srv, fmt)
        check(status == 200 and parse_reply(fmt, False, data)[0] == REPLY, "%s ok: %d" % (fmt, status))

        for stream in (False, True):
            what = "%s stream=%s" % (fmt, stream)
            # truncated: a complete HTTP message that does not parse
            set_faults(srv, ["truncated"])
            status, data, incomplete = read_all_or_incomplete(fmt, stream, srv)
            check(status == 200 and not incomplete, "%s truncated: status %d incomplete %s" % (what, status, incomplete))
            if not stream:
                try:
                    json.loads(data.decode("utf-8"))
                    check(False, "%s truncated body parses as JSON" % what)
                except ValueError:
                    pass
            else:
                try:
                    parse_reply(fmt, True, data)
                    check(False, "%s truncated stream parses" % what)
                except (ValueError, KeyError, Failure):
                    pass
            # cut: the connection drops mid-message
            set_faults(srv, ["cut"])
            status, data, incomplete = read_all_or_incomplete(fmt, stream, srv)
            check(status == 200 and incomplete, "%s cut: status %d incomplete %s" % (what, status, incomplete))
            marker = {"openai": b"[DONE]", "anthropic": b"message_stop", "gemini": b"finishReason"}[fmt]
            check(marker not in data, "%s cut: end marker present" % what)
            check(len(data) > 0, "%s cut: nothing sent before the cut" % what)

    # slow: the whole reply comes late
    set_faults(srv, ["slow@0.25"])
    t = time.time()
    status, _, data = call(srv, "openai")
    check(status == 200 and time.time() - t >= 0.25, "slow: %d after %.2fs" % (status, time.time() - t))
    # stall: headers and the first event at once, the rest after the pause
    set_faults(srv, ["stall@0.3", "stall@0.2"])
    path, body, headers = request("anthropic", stream=True)
    req = urllib.request.Request(srv.url(path), data=json.dumps(body).encode("utf-8"), headers=headers)
    t = time.time()
    with OPENER.open(req, timeout=10) as resp:
        first = resp.readline()
        t_first = time.time() - t
        rest = resp.read()
    t_all = time.time() - t
    check(first == b"event: message_start\n" and t_first < 0.2, "stall: first line %r after %.2fs" % (first, t_first))
    check(t_all >= 0.3, "stall: the stream ended after %.2fs" % t_all)
    check(parse_reply("anthropic", True, first + rest)[0] == REPLY, "stall: stream incomplete")
    t = time.time()
    status, _, data = call(srv, "gemini")  # stall on a non-streamed request = slow
    check(status == 200 and time.time() - t >= 0.2, "stall (non-streamed): %.2fs" % (time.time() - t))
    check(get_json(srv, "/_stats")["queue"] == [], "fault queue not consumed")


def test_random_faults(srv):
    """rate 1 always fails; a seeded rate gives the same sequence twice."""
    set_faults(srv, [], rate=1.0, kinds=["503"])
    check(call(srv, "openai")[0] == 503, "rate 1.0 did not fail")
    runs = []
    for _ in range(2):
        set_faults(srv, [], rate=0.5, kinds=["500", "429@0"], seed=7)
        runs.append([call(srv, "gemini")[0] for _ in range(12)])
    check(runs[0] == runs[1], "seeded random faults differ: %r vs %r" % tuple(runs))
    check(set(runs[0]) == {200, 500, 429}, "rate 0.5 over 12 requests gave %r" % runs[0])
    set_faults(srv, [], rate=0.0)
    check(call(srv, "openai")[0] == 200, "rate 0 still failing")
    status, _, _ = post(srv, "/_control/faults", {"queue": ["bogus"]})
    check(status == 400, "a bad fault spec was accepted: %d" % status)


def test_stats_and_concurrency(srv):
    control(srv, "/_control/reset", {})
    s = get_json(srv, "/_stats")
    check(s["requests"] == 0 and s["max_in_flight"] == 0 and s["by_status"] == {}, "reset: %r" % s)
    set_faults(srv, ["slow@0.3"] * 8)
    statuses = []

    def worker(i):
        statuses.append(call(srv, ("openai", "anthropic", "gemini")[i % 3], stream=bool(i % 2))[0])

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    t = time.time()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    elapsed = time.time() - t
    check(statuses == [200] * 8, "concurrent statuses %r" % statuses)
    check(elapsed < 1.5, "8 slow@0.3 requests took %.2fs: not served concurrently" % elapsed)
    s = get_json(srv, "/_stats")
    check(s["max_in_flight"] > 1, "max_in_flight %r" % s["max_in_flight"])
    check(s["in_flight"] == 0, "in_flight %r" % s["in_flight"])
    check(s["requests"] == 8 and s["by_status"] == {"200": 8} and s["by_fault"] == {"slow": 8}, "stats %r" % s)
    check(sum(s["paths"].values()) == 8 and s["paths"].get(OPENAI) == 3, "paths %r" % s["paths"])
    check(isinstance(s["last_body"], dict), "last_body %r" % s["last_body"])
    return s["max_in_flight"]


def test_keepalive_and_expect(srv):
    """Several requests, streamed ones included, on one connection; Expect: 100-continue."""
    conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=10)
    sock_ids = set()
    try:
        for fmt, stream in (("openai", False), ("openai", True), ("anthropic", True), ("gemini", False),
                            ("gemini", True), ("openai", False)):
            path, body, headers = request(fmt, stream=stream)
            conn.request("POST", path, json.dumps(body), headers)
            resp = conn.getresponse()
            data = resp.read()
            check(resp.status == 200 and parse_reply(fmt, stream, data)[0] == REPLY, "keep-alive %s" % fmt)
            check(not resp.will_close, "server closed the connection after %s stream=%s" % (fmt, stream))
            sock_ids.add(id(conn.sock))
    finally:
        conn.close()
    check(len(sock_ids) == 1, "keep-alive used %d connections" % len(sock_ids))

    # libcurl sends Expect: 100-continue before large bodies.
    path, body, headers = request("openai")
    body["messages"][1]["content"] = "x" * 5000
    payload = json.dumps(body).encode("utf-8")
    s = socket.create_connection(("127.0.0.1", srv.port), timeout=10)
    try:
        head = "POST %s HTTP/1.1\r\nHost: x\r\nAuthorization: %s\r\nContent-Type: application/json\r\n" \
               "Content-Length: %d\r\nExpect: 100-continue\r\n\r\n" % (path, headers["Authorization"], len(payload))
        s.sendall(head.encode("ascii"))
        interim = s.recv(1024)
        check(interim.startswith(b"HTTP/1.1 100"), "no 100 Continue: %r" % interim)
        s.sendall(payload)
        reply = b""
        while b"\r\n\r\n" not in reply:
            reply += s.recv(65536)
        check(reply.startswith(b"HTTP/1.1 200"), "after 100 Continue: %r" % reply[:80])
    finally:
        s.close()


def test_log(log_path):
    with open(log_path, encoding="utf-8") as f:
        text = f.read()
    check(KEY not in text, "the API key appears in the request log")
    lines = [json.loads(l) for l in text.splitlines()]
    check(len(lines) > 50, "only %d log lines" % len(lines))
    for rec in lines:
        for field in ("time", "path", "status", "fault", "headers", "body"):
            check(field in rec, "log record without %s: %r" % (field, rec))
    auth = [r for r in lines if "Authorization" in r["headers"] or "x-api-key" in r["headers"]
            or "x-goog-api-key" in r["headers"]]
    check(auth and all(v == "<present>" for r in auth for k, v in r["headers"].items()
                       if k.lower() in ("authorization", "x-api-key", "x-goog-api-key")), "auth headers not redacted")
    check(any(r["fault"] == "cut" for r in lines), "no cut fault in the log")
    return len(lines)


def test_reply_option(tmp):
    """--reply with non-ASCII text (tokens count characters), and SIGTERM shuts down with 0."""
    reply = "h\u00e9llo \u2713 caf\u00e9"
    srv = Server(tmp, "--reply", reply, "--faults", "500")
    try:
        check(call(srv, "anthropic")[0] == 500, "--faults queue not applied")
        for fmt in ("openai", "anthropic", "gemini"):
            for stream in (False, True):
                status, _, data = call(srv, fmt, stream=stream)  # any key, any model accepted
                text, _, _, tout, _ = parse_reply(fmt, stream, data)
                check(status == 200 and text == reply and tout == tokens(reply), "--reply %s: %r %r" % (fmt, text, tout))
    finally:
        rc = srv.stop()
    check(rc == 0, "server exited with %r on SIGTERM" % rc)


def main():
    t0 = time.time()
    tmp = tempfile.mkdtemp(prefix="fake_llm_selftest.")
    log_path = os.path.join(tmp, "requests.jsonl")
    srv = None
    try:
        srv = Server(tmp, "--key", KEY, "--models", ",".join(MODELS), "--reply", REPLY, "--log", log_path)
        test_formats(srv)
        test_errors(srv)
        test_faults(srv)
        test_random_faults(srv)
        test_keepalive_and_expect(srv)
        max_in_flight = test_stats_and_concurrency(srv)
        rc = srv.stop()
        check(rc == 0, "server exited with %r on SIGTERM" % rc)
        n_log = test_log(log_path)
        test_reply_option(tmp)
    except Exception as e:
        detail = "" if isinstance(e, Failure) else " (%s)" % type(e).__name__
        sys.stdout.write("FAIL: %s%s\n" % (e, detail))
        if not isinstance(e, Failure):
            import traceback
            traceback.print_exc()
        if srv is not None:
            srv.stop()
            err = srv.stderr_text()
            if err.strip():
                sys.stdout.write("server stderr:\n%s\n" % err)
        return 1
    finally:
        if srv is not None:
            srv.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write("fake_llm selftest OK (python %s): 3 formats x stream/non-stream/thinking, auth/model/"
                     "key-in-URL errors, all fault kinds, random faults, keep-alive, max_in_flight=%d, "
                     "%d log lines, %.1fs\n" % (sys.version.split()[0], max_in_flight, n_log, time.time() - t0))
    return 0


if __name__ == "__main__":
    sys.exit(main())
