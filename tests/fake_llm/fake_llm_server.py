#!/usr/bin/env python3
"""A fake LLM provider for kiln's tests (Python standard library only).

It speaks the three wire formats kiln uses, on 127.0.0.1:

  * OpenAI-compatible chat completions   POST <prefix>/chat/completions
  * Anthropic Messages                   POST <prefix>/messages
  * Google Gemini                        POST <prefix>/models/<model>:generateContent
                                         POST <prefix>/models/<model>:streamGenerateContent?alt=sse

each streamed (server-sent events) and non-streamed, and can inject faults (rate limits, server
errors, slow or stalled replies, cut connections, truncated or garbage bodies) from a queue
and/or at random. Control endpoints (no auth): GET /_stats, POST /_control/faults,
POST /_control/reset. See README.md next to this file, or run with --help.
"""

import argparse
import collections
import json
import math
import os
import random
import re
import signal
import socket
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DEFAULT_REPLY = (
    "Here is an optimized version of the model that keeps the computation in one fused module.\n"
    "\n"
    "```python\n"
    "import torch\n"
    "import torch.nn as nn\n"
    "\n"
    "\n"
    "class ModelNew(torch.nn.Module):\n"
    "    def __init__(self, *args, **kwargs):\n"
    "        super().__init__()\n"
    "\n"
    "    def forward(self, x):\n"
    "        return torch.relu(x)\n"
    "```\n"
)

# The (fixed) reasoning text used when a request enables thinking. Its length decides the
# thinking token count: ceil(len / 4).
THINKING_TEXT = (
    "The reference applies its operations one after another; fusing them into a single pass "
    "avoids materialising the intermediate tensors, so I will write one module that does that."
)

# Header names whose values are secrets: never logged, only marked "<present>".
AUTH_HEADERS = {"authorization", "proxy-authorization", "x-api-key", "x-goog-api-key", "api-key"}
# Query parameters that would carry a key in the URL (which kiln must never do).
KEY_QUERY_PARAMS = {"key", "api_key", "apikey", "access_token"}

GEMINI_PATH = re.compile(r"^(?P<prefix>.*)/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$")

# Statuses that exist as fault kinds, and the default Retry-After of "429".
ERROR_FAULTS = {"401", "403", "404", "429", "500", "502", "503", "529"}
OTHER_FAULTS = {"slow", "stall", "truncated", "cut", "garbage", "ok"}
DEFAULT_RANDOM_KINDS = "429@0,500,503,cut,truncated"


def tokens(text):
    """The server's deterministic token count: one token per 4 characters, rounded up."""
    return int(math.ceil(len(text) / 4.0))


def split_pieces(text, n=6):
    """Splits `text` into up to `n` consecutive pieces (at least one, possibly empty)."""
    if not text:
        return [""]
    size = max(1, int(math.ceil(len(text) / float(n))))
    return [text[i:i + size] for i in range(0, len(text), size)]


def dumps(obj, indent=None):
    # Raw UTF-8 like the real providers (not \u escapes), and one line unless indent is given.
    return json.dumps(obj, ensure_ascii=False, indent=indent, separators=None if indent else (",", ":"))


# --------------------------------------------------------------------------------------------
# Faults
# --------------------------------------------------------------------------------------------

class Fault(collections.namedtuple("Fault", "kind arg spec")):
    """One fault: kind ("429", "slow", "cut", ...), its numeric argument (or None), its spec."""


def parse_fault(spec):
    """Parses one fault spec such as "429@2", "500", "slow@0.5" or "cut"; raises ValueError."""
    spec = spec.strip()
    kind, _, arg = spec.partition("@")
    if kind in ERROR_FAULTS:
        if kind != "429":
            if arg:
                raise ValueError("fault %r takes no @argument" % spec)
            return Fault(kind, None, spec)
        # Retry-After is an integer number of seconds (HTTP delta-seconds), so no fractions.
        seconds = 1
        if arg:
            if not arg.isdigit():
                raise ValueError("429@S needs a whole number of seconds >= 0, got %r" % spec)
            seconds = int(arg)
        return Fault(kind, seconds, spec)
    if kind in ("slow", "stall"):
        seconds = 1.0
        if arg:
            try:
                seconds = float(arg)
            except ValueError:
                raise ValueError("%s@S needs a number of seconds, got %r" % (kind, spec))
            if seconds < 0 or math.isnan(seconds) or math.isinf(seconds):
                raise ValueError("%s@S needs a finite number of seconds >= 0, got %r" % (kind, spec))
        return Fault(kind, seconds, spec)
    if kind in OTHER_FAULTS:
        if arg:
            raise ValueError("fault %r takes no @argument" % spec)
        return Fault(kind, None, spec)
    raise ValueError("unknown fault %r (known: %s, slow@S, stall@S)"
                     % (spec, ", ".join(sorted(ERROR_FAULTS | OTHER_FAULTS - {"slow", "stall"}))))


def parse_fault_list(value):
    """A comma-separated string or a JSON list of specs -> list of Fault."""
    if value is None:
        return []
    if isinstance(value, str):
        items = [s for s in value.split(",") if s.strip()]
    elif isinstance(value, list):
        items = value
    else:
        raise ValueError("faults must be a comma-separated string or a list of strings")
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ValueError("fault specs must be strings, got %r" % (item,))
        out.append(parse_fault(item))
    return out


def parse_rate(value):
    rate = float(value)
    if not 0.0 <= rate <= 1.0:
        raise ValueError("fault rate must be in [0, 1], got %r" % (value,))
    return rate


# --------------------------------------------------------------------------------------------
# Shared state: configuration, fault queue, statistics, request log
# --------------------------------------------------------------------------------------------

class State:
    def __init__(self, args):
        self.key = args.key
        self.echo_auth = getattr(args, "echo_auth", False)
        self.models = set(m.strip() for m in args.models.split(",") if m.strip()) if args.models else None
        self.reply = args.reply_text
        # With --reply-dir: several replies, served in turn (request n gets reply n mod count),
        # so that one run sees good, broken, wrong and cheating programs.
        self.replies = args.replies
        self.reply_turn = 0
        self.verbose = args.verbose
        self.lock = threading.Lock()
        self.queue = collections.deque(parse_fault_list(args.faults))
        self.rate = parse_rate(args.fault_rate)
        self.kinds = parse_fault_list(args.fault_kinds)
        self.rng = random.Random(args.fault_seed)
        self.log_file = open(args.log, "a", encoding="utf-8") if args.log else None
        self.log_lock = threading.Lock()
        self.next_id = 0
        self.in_flight = 0
        self.reset_stats()

    def reset_stats(self):
        """Zeroes the statistics (the caller holds the lock, or there are no threads yet)."""
        self.requests = 0
        self.by_status = collections.Counter()
        self.by_fault = collections.Counter()
        self.max_in_flight = self.in_flight
        self.key_in_url = 0
        self.last_body = None
        self.paths = collections.Counter()

    def next_reply(self):
        if not self.replies:
            return self.reply
        with self.lock:
            text = self.replies[self.reply_turn % len(self.replies)]
            self.reply_turn += 1
        return text

    def new_id(self):
        with self.lock:
            self.next_id += 1
            return self.next_id

    def begin(self, path):
        with self.lock:
            self.requests += 1
            self.paths[path] += 1
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)

    def end(self, status, fault):
        with self.lock:
            self.in_flight -= 1
            self.by_status[str(status)] += 1
            if fault is not None:
                self.by_fault[fault.kind] += 1

    def draw_fault(self):
        """The fault for the next served request: the queue's head, else a random one (or None).

        Everything happens under the lock so that the queue and the seeded generator are consumed
        in arrival order, which makes a run reproducible from --faults/--fault-seed."""
        with self.lock:
            if self.queue:
                return self.queue.popleft()
            if self.rate > 0 and self.kinds and self.rng.random() < self.rate:
                return self.rng.choice(self.kinds)
            return None

    def set_faults(self, config):
        """Applies a /_control/faults body; keys that are absent keep their current value."""
        queue = parse_fault_list(config["queue"]) if "queue" in config else None
        rate = parse_rate(config["rate"]) if "rate" in config else None
        kinds = parse_fault_list(config["kinds"]) if "kinds" in config else None
        seed = config.get("seed")
        with self.lock:
            if queue is not None:
                self.queue = collections.deque(queue)
            if rate is not None:
                self.rate = rate
            if kinds is not None:
                self.kinds = kinds
            if seed is not None:
                self.rng = random.Random(seed)
            return self.fault_config_locked()

    def fault_config_locked(self):
        return {"queue": [f.spec for f in self.queue], "rate": self.rate, "kinds": [f.spec for f in self.kinds]}

    def stats(self):
        with self.lock:
            out = {
                "requests": self.requests,
                "by_status": dict(self.by_status),
                "by_fault": dict(self.by_fault),
                "max_in_flight": self.max_in_flight,
                "in_flight": self.in_flight,
                "key_in_url": self.key_in_url,
                "last_body": self.last_body,
                "paths": dict(self.paths),
            }
            out.update(self.fault_config_locked())
            return out

    def log(self, record):
        if self.log_file is None:
            return
        line = dumps(record) + "\n"
        with self.log_lock:
            if self.log_file is not None:  # may have been closed at shutdown meanwhile
                self.log_file.write(line)
                self.log_file.flush()


# --------------------------------------------------------------------------------------------
# Provider-shaped errors
# --------------------------------------------------------------------------------------------

OPENAI_ERROR_TYPES = {400: "invalid_request_error", 401: "invalid_request_error", 403: "permission_denied",
                      404: "invalid_request_error", 429: "requests", 500: "server_error",
                      502: "server_error", 503: "server_error", 529: "server_error"}
ANTHROPIC_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
                         404: "not_found_error", 429: "rate_limit_error", 500: "api_error",
                         502: "api_error", 503: "overloaded_error", 529: "overloaded_error"}
GEMINI_STATUSES = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
                   404: "NOT_FOUND", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL", 502: "UNAVAILABLE",
                   503: "UNAVAILABLE", 529: "UNAVAILABLE"}
DEFAULT_MESSAGES = {400: "Bad request", 401: "Unauthorized", 403: "Permission denied",
                    404: "Not found", 429: "Rate limit exceeded, please retry later",
                    500: "Internal server error", 502: "Bad gateway", 503: "Service unavailable",
                    529: "Overloaded"}


def error_body(fmt, status, message=None, code=None):
    """The error JSON each provider sends for `status` (fmt None: a generic shape)."""
    message = message or DEFAULT_MESSAGES.get(status, "Error")
    if fmt == "anthropic":
        return {"type": "error", "error": {"type": ANTHROPIC_ERROR_TYPES.get(status, "api_error"), "message": message}}
    if fmt == "gemini":
        return {"error": {"code": status, "message": message, "status": GEMINI_STATUSES.get(status, "UNKNOWN")}}
    if code is None and status == 429:
        code = "rate_limit_exceeded"
    return {"error": {"message": message, "type": OPENAI_ERROR_TYPES.get(status, "server_error"),
                      "param": None, "code": code}}


def auth_error(fmt):
    if fmt == "anthropic":
        return error_body(fmt, 401, "invalid x-api-key")
    if fmt == "gemini":
        return error_body(fmt, 401, "API key not valid")
    return {"error": {"message": "Incorrect API key provided", "type": "invalid_request_error",
                      "code": "invalid_api_key"}}


def model_error(fmt, model):
    if fmt == "anthropic":
        return error_body(fmt, 404, "model: %s" % model)
    if fmt == "gemini":
        return error_body(fmt, 404, "models/%s is not found for API version v1beta, or is not supported "
                                    "for generateContent." % model)
    return error_body(fmt, 404, "The model `%s` does not exist or you do not have access to it." % model,
                      code="model_not_found")


class Reject(Exception):
    """A request the server answers with an error before any fault is drawn."""

    def __init__(self, status, body):
        Exception.__init__(self, status)
        self.status = status
        self.body = body


# --------------------------------------------------------------------------------------------
# Replies: one parsed request -> a whole JSON body, and the same as a list of SSE events
# --------------------------------------------------------------------------------------------

def text_of(content):
    """All text in a message content: a string, or a list of parts/blocks with "text"."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(text_of(p.get("text", "")) if isinstance(p, dict) else text_of(p) for p in content)
    return ""


class Call:
    """One served API request: format, model, whether streamed/thinking, token counts."""

    def __init__(self, fmt, body, model, stream, reply, call_id):
        self.fmt = fmt
        self.body = body
        self.model = model
        self.stream = stream
        self.text = reply
        self.call_id = call_id
        self.created = int(time.time())
        self.thinking = self._thinking_enabled()
        self.input_tokens = tokens(self._prompt_text())
        self.text_tokens = tokens(self.text)
        self.thinking_tokens = tokens(THINKING_TEXT) if self.thinking else 0

    def _prompt_text(self):
        b = self.body
        if self.fmt == "openai":
            return "".join(text_of(m.get("content")) for m in b.get("messages") or [] if isinstance(m, dict))
        if self.fmt == "anthropic":
            return text_of(b.get("system")) + "".join(
                text_of(m.get("content")) for m in b.get("messages") or [] if isinstance(m, dict))
        system = b.get("systemInstruction") or b.get("system_instruction") or {}
        parts = list(system.get("parts") or []) if isinstance(system, dict) else []
        for c in b.get("contents") or []:
            if isinstance(c, dict):
                parts.extend(c.get("parts") or [])
        return text_of(parts)

    def _thinking_enabled(self):
        b = self.body
        if self.fmt == "openai":
            return b.get("reasoning_effort") not in (None, "", "none")
        if self.fmt == "anthropic":
            thinking = b.get("thinking")
            return isinstance(thinking, dict) and thinking.get("type") in ("enabled", "adaptive")
        config = b.get("generationConfig") or b.get("generation_config") or {}
        thinking = config.get("thinkingConfig") or config.get("thinking_config") or {}
        budget = thinking.get("thinkingBudget", thinking.get("thinking_budget"))
        return budget not in (None, 0)

    # ---- whole (non-streamed) bodies ----

    def body_json(self):
        """The non-streamed reply, serialised."""
        if self.fmt == "openai":
            out = self.text_tokens + self.thinking_tokens
            return dumps({
                "id": "chatcmpl-fake%06d" % self.call_id, "object": "chat.completion",
                "created": self.created, "model": self.model,
                "choices": [{"index": 0, "message": {"role": "assistant", "content": self.text},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": self.input_tokens, "completion_tokens": out,
                          "total_tokens": self.input_tokens + out,
                          "completion_tokens_details": {"reasoning_tokens": self.thinking_tokens}},
            })
        if self.fmt == "anthropic":
            content = [{"type": "text", "text": self.text}]
            if self.thinking:
                content.insert(0, {"type": "thinking", "thinking": THINKING_TEXT, "signature": "x"})
            return dumps({
                "id": "msg_fake%06d" % self.call_id, "type": "message", "role": "assistant",
                "model": self.model, "content": content, "stop_reason": "end_turn", "stop_sequence": None,
                "usage": {"input_tokens": self.input_tokens,
                          "output_tokens": self.text_tokens + self.thinking_tokens},
            })
        parts = [{"text": self.text}]
        if self.thinking:
            parts.insert(0, {"text": THINKING_TEXT, "thought": True})
        # Gemini pretty-prints its JSON: a multi-line body keeps the client's parser honest.
        return dumps({
            "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
            "usageMetadata": self._gemini_usage(),
            "modelVersion": self.model,
            "responseId": "fake%06d" % self.call_id,
        }, indent=2)

    def _gemini_usage(self):
        usage = {"promptTokenCount": self.input_tokens, "candidatesTokenCount": self.text_tokens}
        if self.thinking:
            usage["thoughtsTokenCount"] = self.thinking_tokens
        usage["totalTokenCount"] = self.input_tokens + self.text_tokens + self.thinking_tokens
        return usage

    # ---- streams: a list of (event name or None, data string); framing is done by sse() ----

    def events(self):
        return getattr(self, "_events_" + self.fmt)()

    def _events_openai(self):
        include_usage = bool((self.body.get("stream_options") or {}).get("include_usage"))

        def chunk(delta, finish=None):
            c = {"id": "chatcmpl-fake%06d" % self.call_id, "object": "chat.completion.chunk",
                 "created": self.created, "model": self.model,
                 "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
            if include_usage:
                c["usage"] = None  # as OpenAI does: null on every chunk but the last
            return (None, dumps(c))

        ev = [chunk({"role": "assistant", "content": ""})]
        ev += [chunk({"content": piece}) for piece in split_pieces(self.text)]
        ev.append(chunk({}, "stop"))
        if include_usage:
            out = self.text_tokens + self.thinking_tokens
            ev.append((None, dumps({
                "id": "chatcmpl-fake%06d" % self.call_id, "object": "chat.completion.chunk",
                "created": self.created, "model": self.model, "choices": [],
                "usage": {"prompt_tokens": self.input_tokens, "completion_tokens": out,
                          "total_tokens": self.input_tokens + out,
                          "completion_tokens_details": {"reasoning_tokens": self.thinking_tokens}}})))
        ev.append((None, "[DONE]"))
        return ev

    def _events_anthropic(self):
        def e(name, obj):
            return (name, dumps(obj))

        ev = [e("message_start", {"type": "message_start", "message": {
            "id": "msg_fake%06d" % self.call_id, "type": "message", "role": "assistant", "model": self.model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": self.input_tokens, "output_tokens": 1}}})]
        index = 0
        if self.thinking:
            ev.append(e("content_block_start", {"type": "content_block_start", "index": 0,
                                                "content_block": {"type": "thinking", "thinking": ""}}))
            for piece in split_pieces(THINKING_TEXT, 3):
                ev.append(e("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                    "delta": {"type": "thinking_delta", "thinking": piece}}))
            ev.append(e("content_block_delta", {"type": "content_block_delta", "index": 0,
                                                "delta": {"type": "signature_delta", "signature": "x"}}))
            ev.append(e("content_block_stop", {"type": "content_block_stop", "index": 0}))
            index = 1
        ev.append(e("content_block_start", {"type": "content_block_start", "index": index,
                                            "content_block": {"type": "text", "text": ""}}))
        ev.append(e("ping", {"type": "ping"}))
        pieces = split_pieces(self.text)
        for i, piece in enumerate(pieces):
            ev.append(e("content_block_delta", {"type": "content_block_delta", "index": index,
                                                "delta": {"type": "text_delta", "text": piece}}))
            if i == len(pieces) // 2 and len(pieces) > 2:
                ev.append(e("ping", {"type": "ping"}))  # pings may come anywhere in a stream
        ev.append(e("content_block_stop", {"type": "content_block_stop", "index": index}))
        ev.append(e("message_delta", {"type": "message_delta",
                                      "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                                      "usage": {"output_tokens": self.text_tokens + self.thinking_tokens}}))
        ev.append(e("message_stop", {"type": "message_stop"}))
        return ev

    def _events_gemini(self):
        def chunk(parts, last=False):
            cand = {"content": {"role": "model", "parts": parts}, "index": 0}
            c = {"candidates": [cand]}
            if last:
                cand["finishReason"] = "STOP"
                c["usageMetadata"] = self._gemini_usage()
            c["modelVersion"] = self.model
            c["responseId"] = "fake%06d" % self.call_id
            return (None, dumps(c))

        ev = []
        if self.thinking:
            ev.append(chunk([{"text": THINKING_TEXT, "thought": True}]))
        pieces = split_pieces(self.text)
        for i, piece in enumerate(pieces):
            ev.append(chunk([{"text": piece}], last=(i == len(pieces) - 1)))
        return ev

    def sse(self, event):
        """Frames one event: OpenAI `data:` + LF LF, Anthropic `event:`/`data:`, Gemini CRLF CRLF."""
        name, data = event
        if self.fmt == "gemini":
            return ("data: %s\r\n\r\n" % data).encode("utf-8")
        if name is not None:
            return ("event: %s\ndata: %s\n\n" % (name, data)).encode("utf-8")
        return ("data: %s\n\n" % data).encode("utf-8")


# --------------------------------------------------------------------------------------------
# HTTP
# --------------------------------------------------------------------------------------------

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive; every non-streamed reply has a Content-Length
    server_version = "FakeLLM/1.0"
    # TCP_NODELAY: headers and body go out in separate writes, and with Nagle's algorithm the
    # second would wait for the client's delayed ACK (~40 ms per request on a kept-alive connection).
    disable_nagle_algorithm = True
    sys_version = ""

    state = None  # set by main()

    # ---- plumbing ----

    def log_message(self, fmt, *args):
        if self.state.verbose:
            sys.stderr.write("fake_llm: %s %s\n" % (self.address_string(), fmt % args))

    def send_response(self, code, message=None):
        self._status = code  # remembered for the stats and the log
        BaseHTTPRequestHandler.send_response(self, code, message)

    def _read_body(self):
        """The request body as bytes (Content-Length or chunked). Always read in full, even for
        requests answered with an error, so a kept-alive connection stays in step."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            data = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    return bytes(data)
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def _send_bytes(self, status, body, content_type="application/json", headers=None, length=None):
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body) if length is None else length))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._finish()  # the client cannot have the reply before the body is written
        self.wfile.write(body)
        self.wfile.flush()

    def _send_json(self, status, obj, headers=None):
        self._send_bytes(status, dumps(obj).encode("utf-8"), headers=headers)

    def _end_chunks(self):
        """The zero-length chunk that ends a chunked body."""
        self._finish()
        self._chunk(b"")

    def _chunk(self, data):
        """Writes one piece of a chunked (Transfer-Encoding) body."""
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _drop_connection(self):
        """Ends the TCP connection at once, without finishing the HTTP message."""
        self._finish()
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    # ---- routing ----

    _req = None  # the API request being served (None for control endpoints)

    def do_GET(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/_stats":
            self._read_body()
            self._send_json(200, self.state.stats())
        else:
            self._api("GET")

    def do_POST(self):
        path = urllib.parse.urlsplit(self.path).path
        if path == "/_control/faults":
            try:
                config = json.loads(self._read_body().decode("utf-8") or "{}")
                if not isinstance(config, dict):
                    raise ValueError("body must be a JSON object")
                self._send_json(200, self.state.set_faults(config))
            except (ValueError, TypeError) as e:  # json.JSONDecodeError is a ValueError
                self._send_json(400, {"error": str(e)})
        elif path == "/_control/reset":
            self._read_body()
            with self.state.lock:
                self.state.reset_stats()
            self._send_json(200, {"ok": True})
        else:
            self._api("POST")

    # ---- API requests ----

    def _api(self, method):
        split = urllib.parse.urlsplit(self.path)
        raw = self._read_body()
        # What the stats and the log need; filled in as the request is understood.
        self._req = {"started": time.time(), "method": method, "split": split,
                     "fmt": None, "body": None, "fault": None, "finished": False}
        self._status = None
        self.state.begin(split.path)
        try:
            self._req["fmt"], self._req["body"] = self._classify(method, split, raw)
            self._serve(self._req["fmt"], self._req["body"], split)
        except Reject as r:
            self._send_json(r.status, r.body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client went away; nothing more to say
        except Exception:
            traceback.print_exc()
            self.close_connection = True
            if self._status is None:
                try:
                    self._send_json(500, error_body(self._req["fmt"], 500, "fake server bug"))
                except OSError:
                    pass
        finally:
            self._finish()
            self._req = None

    def _finish(self):
        """Records an API request in the stats and the log, once.

        Called just before the last bytes of the reply are written (and at the latest when the
        handler is done), so a client that has its whole reply always finds it in /_stats and
        in the log, and in_flight no longer counts it."""
        req = self._req
        if req is None or req["finished"]:
            return
        req["finished"] = True
        st, split, fault = self.state, req["split"], req["fault"]
        st.end(self._status, fault)
        st.log({
            "time": round(req["started"], 3), "ms": round((time.time() - req["started"]) * 1000, 1),
            "method": req["method"], "path": split.path, "query": self._redacted_query(split.query),
            "format": req["fmt"], "status": self._status, "fault": fault.spec if fault else None,
            "headers": dict((k, "<present>" if k.lower() in AUTH_HEADERS else v)
                            for k, v in self.headers.items()),
            "body": req["body"],
        })

    @staticmethod
    def _redacted_query(query):
        pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
        return "&".join("%s=%s" % (k, "<present>" if k.lower() in KEY_QUERY_PARAMS else v) for k, v in pairs)

    def _classify(self, method, split, raw):
        """Checks a request up to the point where a fault may be drawn.

        Returns (format, parsed body), or raises Reject. Requests rejected here (bad path, key in
        the URL, bad key, missing header, bad JSON, unknown model) do not consume a fault."""
        st = self.state
        path = urllib.parse.unquote(split.path)
        gemini = GEMINI_PATH.match(path)
        if path.endswith("/chat/completions"):
            fmt = "openai"
        elif path.endswith("/messages"):
            fmt = "anthropic"
        elif gemini:
            fmt = "gemini"
        else:
            raise Reject(404, error_body(None, 404, "no such endpoint: %s %s" % (method, split.path)))
        if method != "POST":
            raise Reject(405, error_body(fmt, 405, "method %s not allowed" % method))

        # A key in the URL ends up in proxy and server logs: kiln must never send one.
        query = urllib.parse.parse_qs(split.query, keep_blank_values=True)
        if any(k.lower() in KEY_QUERY_PARAMS or (st.key and st.key in v) for k, v in query.items()):
            with st.lock:
                st.key_in_url += 1
            raise Reject(400, error_body(fmt, 400, "API keys must be sent in a header, not in the URL"))

        if fmt == "openai":
            auth = self.headers.get("Authorization", "")
            key = auth[len("Bearer "):].strip() if auth.startswith("Bearer ") else ""
        elif fmt == "anthropic":
            key = self.headers.get("x-api-key", "")
        else:
            key = self.headers.get("x-goog-api-key", "")
        if not key or (st.key is not None and key != st.key):
            raise Reject(401, auth_error(fmt))

        if fmt == "anthropic" and not self.headers.get("anthropic-version"):
            raise Reject(400, error_body(fmt, 400, "anthropic-version: header is required"))

        try:
            body = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as e:
            raise Reject(400, error_body(fmt, 400, "request body is not valid JSON: %s" % e))
        if not isinstance(body, dict):
            raise Reject(400, error_body(fmt, 400, "request body must be a JSON object"))
        with st.lock:
            st.last_body = body

        if fmt == "gemini":
            model = gemini.group("model")
            if gemini.group("method") == "streamGenerateContent" and query.get("alt") != ["sse"]:
                # Without alt=sse Gemini streams one big JSON array; kiln must ask for SSE.
                raise Reject(400, error_body(fmt, 400, "this fake server streams only with ?alt=sse"))
            if not isinstance(body.get("contents"), list) or not body["contents"]:
                raise Reject(400, error_body(fmt, 400, "contents is not specified"))
        else:
            model = body.get("model")
            if not isinstance(model, str) or not model:
                raise Reject(400, error_body(fmt, 400, "model: field required"))
            if not isinstance(body.get("messages"), list) or not body["messages"]:
                raise Reject(400, error_body(fmt, 400, "messages: field required"))
            if fmt == "anthropic" and not isinstance(body.get("max_tokens"), int):
                raise Reject(400, error_body(fmt, 400, "max_tokens: field required"))
        if st.models is not None and model not in st.models:
            raise Reject(404, model_error(fmt, model))
        return fmt, body

    def _serve(self, fmt, body, split):
        """Draws a fault and answers a valid request accordingly. Returns the fault (or None)."""
        st = self.state
        fault = self._req["fault"] = st.draw_fault()
        kind = fault.kind if fault else "ok"
        if fmt == "gemini":
            stream = split.path.endswith(":streamGenerateContent")
        else:
            stream = bool(body.get("stream"))
        model = body.get("model") if fmt != "gemini" else GEMINI_PATH.match(
            urllib.parse.unquote(split.path)).group("model")
        call = Call(fmt, body, model, stream, st.next_reply(), st.new_id())

        if kind in ERROR_FAULTS:
            status = int(kind)
            headers = {"Retry-After": str(fault.arg)} if kind == "429" else None
            message = None
            if st.echo_auth:
                # As careless proxies and providers do: the credential the request carried,
                # quoted back in the error body (kiln must keep it out of what it writes).
                message = "%s (the request had %s)" % (
                    DEFAULT_MESSAGES.get(status, "Error"), "; ".join(
                        "%s: %s" % (k, v) for k, v in self.headers.items()
                        if k.lower() in AUTH_HEADERS))
            self._send_json(status, error_body(fmt, status, message), headers)
            return fault
        if kind == "garbage":
            self._send_bytes(200, b"<html>upstream error</html>", content_type="text/html")
            return fault
        if kind == "slow" or (kind == "stall" and not stream):
            time.sleep(fault.arg)

        if not stream:
            data = call.body_json().encode("utf-8")
            if kind == "truncated":
                # A complete HTTP message whose JSON is cut in half.
                self._send_bytes(200, data[:len(data) // 2])
            elif kind == "cut":
                # Promise the whole body, send half of it, hang up.
                self._send_bytes(200, data[:len(data) // 2], length=len(data))
                self._drop_connection()
            else:
                self._send_bytes(200, data)
            return fault

        # Streamed: chunked transfer encoding, one chunk per event, so the connection can be
        # kept alive afterwards and a `cut` shows up in the client as an unfinished message.
        events = [call.sse(e) for e in call.events()]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        if kind in ("cut", "truncated"):
            half = max(1, len(events) // 2)
            for ev in events[:half]:
                self._chunk(ev)
            if kind == "cut":
                self._drop_connection()
                return fault
            # truncated: one event whose JSON breaks off, then a clean end of the HTTP body
            # with no end marker.
            broken = events[half]
            self._chunk(broken[:len(broken) // 2] + (b"\r\n\r\n" if fmt == "gemini" else b"\n\n"))
            self._end_chunks()
            return fault
        for i, ev in enumerate(events):
            self._chunk(ev)
            if i == 0 and kind == "stall":
                time.sleep(fault.arg)
        self._end_chunks()
        return fault


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 1024  # the benchmark opens 64+ connections at once


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------

def write_port_file(path, port):
    """Writes the port atomically: a reader sees either no file or the whole number."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".port.", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            f.write("%d\n" % port)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def parse_args(argv):
    p = argparse.ArgumentParser(description="Fake OpenAI/Anthropic/Gemini server for kiln's tests.")
    p.add_argument("--port", type=int, default=0, help="port on 127.0.0.1; 0 picks a free one (default)")
    p.add_argument("--port-file", help="write the port here (atomically) once listening")
    p.add_argument("--key", help="the valid API key (default: any non-empty key is accepted)")
    p.add_argument("--models", help="comma-separated known models (default: any model)")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--reply", help="the reply text")
    g.add_argument("--reply-file", help="file holding the reply text")
    g.add_argument("--reply-dir", help="folder of *.txt replies, served in turn in name order")
    p.add_argument("--faults", default="", help="fault queue, e.g. '429@1,500,ok,cut,truncated'")
    p.add_argument("--fault-rate", default="0", help="probability of a random fault once the queue is empty")
    p.add_argument("--fault-kinds", default=DEFAULT_RANDOM_KINDS,
                   help="kinds drawn for random faults (default: %s)" % DEFAULT_RANDOM_KINDS)
    p.add_argument("--fault-seed", type=int, default=0, help="seed of the random faults (default 0)")
    p.add_argument("--log", help="append one JSON line per API request to this file")
    p.add_argument("--echo-auth", action="store_true",
                   help="error faults quote the request's credential headers in their message")
    p.add_argument("--verbose", action="store_true", help="print an access line per request to stderr")
    args = p.parse_args(argv)
    args.replies = []
    if args.reply_dir:
        for name in sorted(os.listdir(args.reply_dir)):
            if name.endswith(".txt"):
                with open(os.path.join(args.reply_dir, name), encoding="utf-8") as f:
                    args.replies.append(f.read())
        if not args.replies:
            p.error("--reply-dir %s holds no .txt files" % args.reply_dir)
        args.reply_text = args.replies[0]
    elif args.reply_file:
        with open(args.reply_file, encoding="utf-8") as f:
            args.reply_text = f.read()
    elif args.reply is not None:
        args.reply_text = args.reply
    else:
        args.reply_text = DEFAULT_REPLY
    try:
        parse_fault_list(args.faults)
        parse_fault_list(args.fault_kinds)
        parse_rate(args.fault_rate)
    except ValueError as e:
        p.error(str(e))
    return args


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    Handler.state = State(args)
    server = Server(("127.0.0.1", args.port), Handler)
    port = server.server_address[1]

    def stop(signum, frame):
        # shutdown() waits for serve_forever() to return, and serve_forever() runs in this
        # (the main) thread, so it must be called from another one.
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)

    if args.port_file:
        write_port_file(args.port_file, port)
    sys.stdout.write("LISTENING %d\n" % port)
    sys.stdout.flush()
    try:
        server.serve_forever(poll_interval=0.1)
    finally:
        server.server_close()
        st = Handler.state
        with st.log_lock:  # handler threads may still be running: stop their logging first
            if st.log_file:
                st.log_file.close()
                st.log_file = None
    return 0


if __name__ == "__main__":
    sys.exit(main())
