# kiln's build cache for torch.utils.cpp_extension, installed by kiln_harness.py before any
# task or candidate code runs (docs/evaluation.md, "Compilation ahead of the GPU").
#
#   load_inline / load ──> manifest = the build's inputs (sources, flags, torch, python,
#                          compiler, arch); key = sha256(its canonical JSON text)
#        ├─ <cache>/ext/<key>/ exists: import the built library, no compiler runs
#        └─ else, under the flock of <cache>/locks/<key[:3]>.lock (opened read-only, held until
#           this process exits): torch builds it in a private temporary folder, and the library,
#           meta.json and manifest.json are staged in <stage>/ext/<key>/, which kiln (the parent)
#           verifies and publishes into the cache once this runner has ended. A runner never
#           writes the cache: it may only read it.
#
# Every call is recorded in the list install() returns; the harness writes it to result.json
# as `builds`, so the parent knows what was built, what came from the cache and why a build
# failed. torch 1.13's load_inline rebuilds in every new process (it rewrites main.cpp, so
# ninja sees a new file); going through the cache makes a second process only load.

import sys

# The manifest's version (gpu/build_cache.cpp checks it: `manifest_version`).
_KEY_VERSION = "kiln-ext-2"
_PCH_VERSION = "kiln-pch-1"
_SKIPPED_ARGS = ("build_directory", "verbose", "keep_intermediates")
# Variables that torch.utils.cpp_extension reads when it builds, so they change the binary.
_BUILD_ENV = ("CXX", "CC", "CUDA_HOME", "CUDA_PATH", "PYTORCH_NVCC_FLAGS", "NVCC_PREPEND_FLAGS",
              "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
# After waiting for another builder's lock, how long to look for its entry: kiln publishes it
# right after that runner has ended (milliseconds; a large library takes longer to copy).
_PUBLISH_WAIT_S = 10.0
# Held while this runner builds something else: a lock another runner holds is waited for this
# long at most, then the build goes ahead unlocked (two runners that each hold one stripe and
# want the other's would otherwise wait for each other's end).
_NESTED_LOCK_WAIT_S = 60.0
# The sizes gpu/build_cache.hpp accepts (staging_limits): larger builds are not staged.
_MANIFEST_LIMIT = 64 << 20


def install(torch, job):
    """Routes the candidate's extension builds through kiln's cache (when the job names one)
    and returns the list that records every build."""
    import os

    builds = []
    cache = job.get("cache_dir") or ""
    stage = job.get("stage_dir") or ""
    if not cache or not stage:
        return builds
    arch = _target_arch(torch, job)
    if arch and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        # The compile stage sees no GPU, and the GPU runner must compute the same key: both
        # build for the arch list the parent names (or the device's capability).
        os.environ["TORCH_CUDA_ARCH_LIST"] = arch
    tag = _arch_tag(arch)
    # Triton writes its cache groups into the staging folder, whose new groups kiln publishes
    # into <cache>/triton/<tag>; the shared groups are read through a patch of Triton's file
    # cache (_patch_triton_cache). Inductor keeps its own cache in the runner's TMPDIR (the
    # environment kiln gives it), shared with nobody: its entries are Python code and pickles.
    os.environ["TRITON_CACHE_DIR"] = os.path.join(stage, "triton", tag)
    state = _State(torch, cache, stage, builds)
    _states.append(state)
    hooks = {"torch.utils.cpp_extension": state.patch,
             "triton.runtime.cache": lambda m: _patch_triton_cache(
                 m, os.environ["TRITON_CACHE_DIR"], os.path.join(cache, "triton", tag))}
    for name in list(hooks):
        if name in sys.modules:
            hooks.pop(name)(sys.modules[name])
    if hooks:
        # Importing cpp_extension costs ~0.25 s (it pulls in setuptools), Triton more: patch
        # them only when a candidate imports them.
        sys.meta_path.insert(0, _PatchOnImport(hooks))
    return builds


def compile_stage(torch, job, result):
    """The `compile` mode: imports the candidate once without a GPU so that its module-level
    builds land in the cache; or, when the job names `pch_key`, builds that precompiled
    header. Fills `result` (ok, stage, error, builds, pch)."""
    import importlib.util
    import traceback
    import uuid

    result["builds"] = install(torch, job)
    if job.get("pch_key"):
        result["pch"] = build_pch(torch, job)
        result["ok"] = not result["pch"].get("error")
        result["stage"] = "done"
        result["error"] = result["pch"].get("error", "")
        return
    try:
        name = "kiln_candidate_%s" % uuid.uuid4().hex
        spec = importlib.util.spec_from_file_location(name, job["candidate_path"])
        if spec is None or spec.loader is None:
            raise ImportError("cannot load %s" % job["candidate_path"])
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        result["stage"] = "done"
        result["ok"] = True
    except BaseException as exc:  # SystemExit from a candidate too
        result["ok"] = False
        result["stage"] = "import"
        result["error"] = " ".join(("%s: %s" % (type(exc).__name__, exc)).split())[:500]
        tb = traceback.format_exc()
        result["traceback"] = tb[-4000:]
        sys.stderr.write(tb)
        sys.stderr.flush()


# -- the wrappers --------------------------------------------------------------------------------


class _PatchOnImport:
    """A meta path finder that lets the modules of `hooks` ({name: patch}) import normally,
    then patches each; it leaves sys.meta_path once every one is patched."""

    def __init__(self, hooks):
        self.hooks = dict(hooks)
        self.busy = False

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.hooks or self.busy:
            return None
        import importlib.util

        patch = self.hooks.pop(fullname)
        if not self.hooks:
            sys.meta_path.remove(self)
        self.busy = True  # find_spec below asks the meta path again, this finder included
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            self.busy = False
        if spec is None or spec.loader is None:
            return spec
        # The loader is this spec's own instance: wrapping its exec_module keeps everything
        # else it offers (source lookups for tracebacks).
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            patch(module)

        spec.loader.exec_module = exec_module
        return spec


class _State:
    def __init__(self, torch, cache, stage, builds):
        self.torch = torch
        self.cache = cache  # read only
        self.stage = stage  # this runner's own: what it builds, for kiln to publish
        self.builds = builds
        self.loaded = {}  # key -> what the first call returned, for repeated calls
        self.locks = {}  # lock stripe -> descriptor, held until the gate or the process's end

    def patch(self, ce):
        if getattr(ce, "_kiln_patched", False):
            return
        import functools

        for kind in ("load_inline", "load"):
            original = getattr(ce, kind)

            def wrapper(*args, _kind=kind, _original=original, **kwargs):
                return self.call(ce, _kind, _original, args, kwargs)

            functools.update_wrapper(wrapper, original)
            setattr(ce, kind, wrapper)
        ce._kiln_patched = True

    def call(self, ce, kind, original, args, kwargs):
        import inspect
        import time

        try:
            bound = inspect.signature(original).bind(*args, **kwargs)
        except TypeError:
            return original(*args, **kwargs)  # torch's own error for bad arguments
        bound.apply_defaults()
        a = dict(bound.arguments)
        for field in ("cpp_sources", "cuda_sources", "sources"):
            if isinstance(a.get(field), str):
                a[field] = [a[field]]
            elif a.get(field) is not None:
                a[field] = list(a[field])  # torch's load_inline edits the caller's list
        record = {"kind": kind, "name": str(a.get("name", "")), "key": "", "hit": False,
                  "seconds": 0.0, "waited_s": 0.0, "pch": False, "pch_key": "", "error": "",
                  "error_line": ""}
        self.builds.append(record)
        t0 = time.perf_counter()
        try:
            with_cuda = _with_cuda(kind, a)
            manifest = _manifest(ce, self.torch, kind, a, with_cuda)
            key = _sha256(manifest)
            record["key"] = key
            if key in self.loaded:
                record["hit"] = True
                return self.loaded[key]
            value = self._hit(key)
            if value is _MISS:
                value = self._locked_build(ce, original, kind, a, key, manifest, with_cuda,
                                           record)
            else:
                record["hit"] = True
            self.loaded[key] = value
            return value
        except BaseException as exc:
            text = str(exc)
            record["error"] = text[-4000:]
            record["error_line"] = _error_line(text) or " ".join(text.split())[:300]
            raise
        finally:
            record["seconds"] = time.perf_counter() - t0
            _say(record)

    def _hit(self, key):
        import os

        entry = os.path.join(self.cache, "ext", key)
        meta = _read_json(os.path.join(entry, "meta.json"))
        if meta is None:
            return _MISS
        path = os.path.join(entry, meta["artifact"])
        try:
            return _load_artifact(self.torch, meta, path)
        except Exception as exc:
            # A damaged entry stays (a runner cannot remove it, and kiln never replaces one):
            # this runner builds its own.
            sys.stderr.write("kiln_build: cached %s unusable (%s); building privately\n"
                             % (path, exc))
            return _MISS

    def _lock(self, key):
        """Takes the lock of `key`'s stripe and keeps it until the gate (release_locks) or until
        this process exits: kiln publishes the build then, so a builder of the same key that
        waits for the lock finds the entry published. True when it had to wait."""
        import fcntl
        import os
        import time

        stripe = key[:3]
        if stripe in self.locks:
            return False
        try:
            # Read-only: runners may not create files in the cache; kiln made every lock file.
            fd = os.open(os.path.join(self.cache, "locks", stripe + ".lock"),
                         os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return False  # a cache kiln has not prepared: build unlocked
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            self.locks[stripe] = fd
            return False
        except OSError:
            pass
        if not self.locks:
            # Holding nothing, this process cannot be part of a cycle of waits: wait for the
            # holder to end. The lock dies with its holder, so a killed builder blocks nobody.
            fcntl.flock(fd, fcntl.LOCK_EX)
            self.locks[stripe] = fd
            return True
        deadline = time.monotonic() + _NESTED_LOCK_WAIT_S
        while time.monotonic() < deadline:
            time.sleep(0.05)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                self.locks[stripe] = fd
                return True
            except OSError:
                pass
        os.close(fd)
        return False

    def _wait_published(self, key):
        import os
        import time

        meta = os.path.join(self.cache, "ext", key, "meta.json")
        deadline = time.monotonic() + _PUBLISH_WAIT_S
        pause = 0.01
        while not os.path.exists(meta) and time.monotonic() < deadline:
            time.sleep(pause)
            pause = min(pause * 2, 0.2)
        return self._hit(key)

    def _locked_build(self, ce, original, kind, a, key, manifest, with_cuda, record):
        import time

        t_wait = time.perf_counter()
        waited = self._lock(key)
        record["waited_s"] = time.perf_counter() - t_wait
        # Another runner built in this stripe: its entry is published once it has ended, which
        # is when the lock came free (unless its build failed, or it built another key).
        value = self._wait_published(key) if waited else self._hit(key)
        if value is not _MISS:
            record["hit"] = True
            return value
        return self._build(ce, original, kind, a, key, manifest, with_cuda, record)

    def _build(self, ce, original, kind, a, key, manifest, with_cuda, record):
        import json
        import os
        import shutil
        import tempfile
        import uuid

        work = tempfile.mkdtemp(prefix="kiln-build-")  # in the runner's /tmp, removed with it
        a = dict(a)
        a["build_directory"] = work
        a["verbose"] = False  # torch then puts the compiler's output into its exception
        if kind == "load_inline":
            pch = _pch_plan(ce, self.torch, self.cache, a.get("extra_cflags") or [], with_cuda)
            if pch is not None:
                record["pch_key"] = pch["key"]
                if pch["ready"]:
                    flags = list(a.get("extra_cflags") or [])
                    a["extra_include_paths"] = [pch["dir"]] + list(a.get("extra_include_paths")
                                                                   or [])
                    if not any(f.strip().startswith("-Werror") for f in flags):
                        # GCC silently skips a PCH whose flags differ; this says why.
                        flags.append("-Winvalid-pch")
                    a["extra_cflags"] = flags
                    record["pch"] = True
                else:
                    _request_pch(self.cache, self.stage, pch, a.get("extra_cflags") or [],
                                 with_cuda)
        try:
            value = original(**a)
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            raise
        artifact = _ninja_default(os.path.join(work, "build.ninja"))
        if not artifact or not os.path.exists(os.path.join(work, artifact)):
            shutil.rmtree(work, ignore_errors=True)
            raise RuntimeError("kiln_build: torch built %r but left no %s" % (a["name"], artifact))
        meta = {"artifact": artifact, "module": artifact.split(".")[0], "kind": kind,
                "name": str(a["name"]), "is_python_module": bool(a.get("is_python_module", True)),
                "is_standalone": bool(a.get("is_standalone", False)),
                "torch": str(self.torch.__version__), "pch": record["pch"]}
        if len(manifest) > _MANIFEST_LIMIT:
            shutil.rmtree(work, ignore_errors=True)
            return value  # built and loaded, but too large for kiln to share
        # Staged complete under a temporary name, then renamed: kiln takes only whole entries
        # (a runner killed mid-copy leaves none).
        root = os.path.join(self.stage, "ext")
        os.makedirs(root, exist_ok=True)
        staging = os.path.join(root, ".tmp-%s-%s" % (key, uuid.uuid4().hex[:8]))
        os.makedirs(staging)
        try:
            shutil.copyfile(os.path.join(work, artifact), os.path.join(staging, artifact))
            for src in ("main.cpp", "cuda.cu"):  # for a human reading the cache
                if os.path.exists(os.path.join(work, src)):
                    shutil.copyfile(os.path.join(work, src), os.path.join(staging, src))
            with open(os.path.join(staging, "manifest.json"), "wb") as f:
                f.write(manifest)
            with open(os.path.join(staging, "meta.json"), "w", encoding="utf-8") as f:
                json.dump(meta, f)
            try:
                os.rename(staging, os.path.join(root, key))
            except OSError:
                pass  # staged before in this process
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(work, ignore_errors=True)
        return value


_MISS = object()
_states = []  # the _State of install(), for release_locks()


def release_locks():
    """Lets go of every build lock this process holds. The harness calls it at the gate, before
    the parent may take the device whole: a runner of another lane that waits for one of these
    locks holds the device shared, so holding them past that point would have each wait for the
    other. kiln publishes the staged builds at the gate, so such a waiter then finds them."""
    import os

    for state in _states:
        for fd in state.locks.values():
            os.close(fd)
        state.locks.clear()


def _load_artifact(torch, meta, path):
    import importlib.util

    if meta.get("is_standalone"):
        return path
    if not meta.get("is_python_module", True):
        torch.ops.load_library(path)
        return None
    spec = importlib.util.spec_from_file_location(meta["module"], path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load %s" % path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _say(record):
    if record["error"]:
        what = "failed after %.1f s: %s" % (record["seconds"], record["error_line"])
    elif record["hit"]:
        what = "cache hit (%.2f s)" % record["seconds"]
    else:
        what = "built in %.1f s%s" % (record["seconds"], " with pch" if record["pch"] else "")
    sys.stderr.write("kiln_build: %s %r key %s: %s\n"
                     % (record["kind"], record["name"], record["key"][:12], what))
    sys.stderr.flush()


def _error_line(text):
    """The first line of a build log that names an error, e.g. `main.cpp:5:3: error: ...`."""
    for marker in (": error:", "): error:", "fatal error:", "error:", "undefined reference",
                   "cannot find -l"):
        for line in text.splitlines():
            if marker in line:
                return line.strip()[:500]
    return ""


# -- the key -------------------------------------------------------------------------------------


def _with_cuda(kind, a):
    if a.get("with_cuda") is not None:
        return bool(a["with_cuda"])
    if kind == "load_inline":
        return bool(a.get("cuda_sources"))
    return any(str(s).endswith((".cu", ".cuh")) for s in a.get("sources") or [])


def _manifest(ce, torch, kind, a, with_cuda):
    """The build's inputs as the bytes of canonical JSON: everything that changes the built
    binary (and nothing that does not, such as the build folder or the path a source was written
    to). The cache key is their sha256, which kiln recomputes before it publishes the build
    (gpu/build_cache.cpp, manifest_key): keys sorted, no spaces, UTF-8 as it is, integers only."""
    import hashlib
    import json
    import os
    import platform
    import sysconfig

    args = {}
    sources = []
    for name in sorted(a):
        if name in _SKIPPED_ARGS:
            continue
        if kind == "load" and name == "sources":
            for src in a[name]:
                with open(src, "rb") as f:
                    sources.append({"suffix": os.path.splitext(str(src))[1],
                                    "sha256": hashlib.sha256(f.read()).hexdigest()})
            continue
        args[name] = _plain(a[name])
    manifest = {
        "v": _KEY_VERSION,
        "kind": kind,
        "args": args,
        "sources": sources,
        "includes": [_tree_digest(str(path)) for path in a.get("extra_include_paths") or []],
        "with_cuda": bool(with_cuda),
        "env": {var: os.environ.get(var, "")
                for var in _BUILD_ENV + (("TORCH_CUDA_ARCH_LIST",) if with_cuda else ())},
        "torch": _plain([str(torch.__version__), str(torch.version.cuda),
                         str(getattr(torch.version, "git_version", "")),
                         os.path.dirname(torch.__file__), bool(torch._C._GLIBCXX_USE_CXX11_ABI)]),
        "python": _plain([sys.version, str(sys.implementation.cache_tag),
                          str(sysconfig.get_config_var("EXT_SUFFIX")), platform.machine()]),
        "cxx": _plain(list(_tool_identity(os.environ.get("CXX", "c++")))),
        "nvcc": _plain(list(_tool_identity(_nvcc(ce)))) if with_cuda else None,
    }
    text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8")


def _sha256(data):
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _plain(value):
    """`value` as JSON that C++ reads back exactly: strings, booleans, null, 64-bit integers,
    lists and string-keyed objects; anything else (floats, objects) as {"py": its repr}."""
    import os

    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        try:
            value.encode("utf-8")
            return value
        except UnicodeError:  # lone surrogates
            return {"py": ascii(value)}
    if isinstance(value, int):
        return value if -(1 << 63) <= value < (1 << 63) else {"py": repr(value)}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        try:
            return {k.encode("utf-8").decode("utf-8"): _plain(v) for k, v in value.items()}
        except UnicodeError:
            pass
    if isinstance(value, os.PathLike):
        return _plain(os.fspath(value))
    return {"py": ascii(repr(value))}


def _tree_digest(path, limit=2000):
    """Names and contents of the files under an include folder (bounded)."""
    import hashlib
    import os

    h = hashlib.sha256(os.path.abspath(path).encode("utf-8"))
    n = 0
    for root, dirs, files in os.walk(path):
        dirs.sort()
        for name in sorted(files):
            full = os.path.join(root, name)
            h.update(os.path.relpath(full, path).encode("utf-8") + b"\0")
            n += 1
            try:
                if n <= limit:
                    with open(full, "rb") as f:
                        h.update(hashlib.sha256(f.read()).digest())
                else:
                    st = os.stat(full)
                    h.update(b"%d:%d" % (st.st_size, st.st_mtime_ns))
            except OSError:
                h.update(b"?")
    return h.hexdigest()


_TOOLS = {}


def _tool_identity(tool):
    """The resolved path and `--version` of a compiler, once per process."""
    import shutil
    import subprocess

    if tool not in _TOOLS:
        path = shutil.which(tool) or tool
        try:
            out = subprocess.run([path, "--version"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, timeout=60).stdout
            text = out.decode("utf-8", "replace")
        except (OSError, subprocess.SubprocessError) as exc:
            text = "unavailable: %s" % exc
        _TOOLS[tool] = (path, text)
    return _TOOLS[tool]


def _nvcc(ce):
    import os

    try:
        return ce._join_cuda_home("bin", "nvcc")
    except Exception:
        return os.path.join(os.environ.get("CUDA_HOME", "/usr/local/cuda"), "bin", "nvcc")


def _target_arch(torch, job):
    arch = str(job.get("arch_list") or "")
    if arch:
        return arch
    device = str(job.get("device") or "cpu")
    if device.startswith("cuda") and torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability(torch.device(device))
        return "%d.%d" % (major, minor)
    return ""


def _arch_tag(arch):
    """`9.0` -> `sm90`, `8.6;9.0+PTX` -> `sm86-sm90+PTX`, empty -> `cpu`."""
    import re

    parts = [p for p in re.split(r"[;\s]+", arch) if p]
    if not parts:
        return "cpu"
    return "-".join("sm" + re.sub(r"[^0-9A-Za-z+]", "", p) for p in parts)


def _read_json(path):
    import json

    try:
        with open(path, "r", encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _ninja_default(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            for line in f:
                if line.startswith("default "):
                    return line.split(None, 1)[1].strip()
    except OSError:
        pass
    return ""


# -- precompiled header --------------------------------------------------------------------------
#
# load_inline's main.cpp starts with `#include <torch/extension.h>`, which is most of its compile
# time. A PCH of that header, built with exactly the flags torch uses for the TU, halves it. Building one costs ~52 s and 650 MB, so a build never waits for it: a miss
# without a PCH stages a request (<stage>/pch-requests/), kiln publishes it under
# <cache>/pch/requests/ and builds the header when a compile worker is idle
# (compile_engine::build_pch: a runner stages it in <stage>/pch/<key>/, kiln publishes it);
# later builds of that flag set use it.


def _torch_cxx_flags(ce, extra_cflags, with_cuda):
    """(compiler, cflags, post_cflags) that torch's own ninja writer uses for a TU of an
    extension with these extra_cflags, without the extension's name; None where unknown."""
    import inspect
    import os
    import shlex
    import shutil
    import tempfile

    writer = getattr(ce, "_write_ninja_file_to_build_library", None)
    if writer is None:
        return None
    d = tempfile.mkdtemp(prefix="kiln-flags-")
    try:
        src = os.path.join(d, "main.cpp")
        open(src, "w").close()
        known = {"path": os.path.join(d, "build.ninja"), "name": "kiln_pch", "sources": [src],
                 "extra_cflags": list(extra_cflags), "extra_cuda_cflags": [],
                 "extra_ldflags": [], "extra_include_paths": [], "with_cuda": with_cuda,
                 "is_standalone": False}
        kwargs = {}
        for p in inspect.signature(writer).parameters.values():
            if p.name in known:
                kwargs[p.name] = known[p.name]
            elif p.default is inspect.Parameter.empty:
                kwargs[p.name] = False  # a switch of a newer torch, e.g. with_sycl
        writer(**kwargs)
        values = {}
        with open(known["path"], "r", encoding="utf-8") as f:
            for line in f:
                if line.startswith("rule "):
                    break
                if " = " in line:
                    k, v = line.split(" = ", 1)
                    values[k.strip()] = v.strip()
        strip = lambda flags: [t for t in flags if not t.startswith("-DTORCH_EXTENSION_NAME=")]
        return (values.get("cxx", "c++"), strip(shlex.split(values.get("cflags", ""))),
                strip(shlex.split(values.get("post_cflags", ""))))
    except Exception:
        return None
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _pch_plan(ce, torch, cache, extra_cflags, with_cuda):
    import hashlib
    import os

    flags = _torch_cxx_flags(ce, extra_cflags, with_cuda)
    if flags is None:
        return None
    cxx, cflags, post = flags
    header = _find_header(cflags + post)
    if not header:
        return None
    ident = repr((_PCH_VERSION, _tool_identity(cxx), cflags, post, header,
                  str(torch.__version__), os.path.dirname(torch.__file__)))
    key = hashlib.sha256(ident.encode("utf-8")).hexdigest()
    d = os.path.join(cache, "pch", key)
    ready = os.path.exists(os.path.join(d, "torch", "extension.h.gch"))
    return {"key": key, "dir": d, "ready": ready, "cxx": cxx, "cflags": cflags, "post": post,
            "header": header}


def _find_header(flags):
    import os

    dirs = []
    for i, t in enumerate(flags):
        if t in ("-isystem", "-I") and i + 1 < len(flags):
            dirs.append(flags[i + 1])
        elif t.startswith("-isystem") and len(t) > 8:
            dirs.append(t[8:])
        elif t.startswith("-I") and len(t) > 2:
            dirs.append(t[2:])
    for d in dirs:
        path = os.path.join(d, "torch", "extension.h")
        if os.path.exists(path):
            return path
    return ""


def _request_pch(cache, stage, pch, extra_cflags, with_cuda):
    import json
    import os
    import uuid

    if os.path.exists(os.path.join(cache, "pch", "requests", pch["key"] + ".json")):
        return
    folder = os.path.join(stage, "pch-requests")
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, pch["key"] + ".json")
    tmp = "%s.%s.tmp" % (path, uuid.uuid4().hex)
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump({"extra_cflags": [str(x) for x in extra_cflags], "with_cuda": bool(with_cuda)},
                  f)
    os.replace(tmp, path)


def build_pch(torch, job):
    """Builds the PCH that request `job["pch_key"]` asks for into the staging folder, for kiln
    to publish (kiln holds the header's lock meanwhile). The flags are recomputed here from the
    request's extra_cflags, so a request can only name a flag set, never a command."""
    import os
    import re
    import shutil
    import subprocess
    import time
    import uuid

    import torch.utils.cpp_extension as ce

    t0 = time.perf_counter()
    cache = job["cache_dir"]
    stage = job.get("stage_dir") or ""
    key = str(job["pch_key"])
    out = {"key": key, "state": "failed", "seconds": 0.0, "error": ""}
    try:
        if not re.fullmatch(r"[0-9a-f]{64}", key):
            out["error"] = "bad pch key %r" % key
            return out
        if not stage:
            out["error"] = "no staging folder"
            return out
        request = _read_json(os.path.join(cache, "pch", "requests", key + ".json"))
        if request is None:
            out["error"] = "no request for pch %s" % key
            return out
        plan = _pch_plan(ce, torch, cache, list(request.get("extra_cflags") or []),
                         bool(request.get("with_cuda")))
        if plan is None or plan["key"] != key:
            out["error"] = "pch request %s does not match this interpreter's torch" % key
            return out
        if os.path.exists(os.path.join(plan["dir"], "torch", "extension.h.gch")):
            out["state"] = "exists"
            return out
        root = os.path.join(stage, "pch")
        os.makedirs(root, exist_ok=True)
        staging = os.path.join(root, ".tmp-%s-%s" % (key, uuid.uuid4().hex[:8]))
        os.makedirs(os.path.join(staging, "torch"))
        try:
            # The header must lie beside its .gch: a source that includes torch/extension.h
            # again must find it there. A copy, not a link: kiln publishes
            # regular files only, and GCC knows the copy as the header the PCH was made of.
            shutil.copyfile(plan["header"], os.path.join(staging, "torch", "extension.h"))
            cmd = ([plan["cxx"], "-x", "c++-header"] + plan["cflags"] + plan["post"]
                   + [plan["header"], "-o", os.path.join(staging, "torch", "extension.h.gch")])
            run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if run.returncode != 0:
                log = run.stdout.decode("utf-8", "replace")
                out["error"] = "pch build failed: %s" % (_error_line(log) or log[-500:])
                sys.stderr.write(log[-4000:])
                return out
            os.rename(staging, os.path.join(root, key))
            out["state"] = "built"
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        return out
    finally:
        out["seconds"] = time.perf_counter() - t0


# -- Triton ----------------------------------------------------------------------------------------
#
# Triton's FileCacheManager reads and writes one folder, TRITON_CACHE_DIR/<key>/ (a group of
# files per compiled kernel, listed by a `__grp__<name>.json` with absolute paths). A runner
# writes only its staging folder, so TRITON_CACHE_DIR points there, and this patch makes the
# default manager also look in the shared cache when its own folder lacks a file: kiln publishes
# a runner's new groups there after it has ended (never one with host code, .so). Dump and
# override managers (other folders) are left alone. Processes that Triton or Inductor start
# without this module (a spawned compile worker) read and write their staging folder only.


def _patch_triton_cache(module, private_dir, shared_dir):
    import json
    import os

    manager = getattr(module, "FileCacheManager", None)
    if manager is None or getattr(manager, "_kiln_shared", None):
        return
    get_file, get_group = manager.get_file, manager.get_group
    private_dir = os.path.abspath(private_dir)

    def shared_group(self):
        folder = getattr(self, "cache_dir", None)
        key = getattr(self, "key", None)
        if not folder or not key or os.path.dirname(os.path.abspath(folder)) != private_dir:
            return None
        return os.path.join(shared_dir, str(key))

    def kiln_get_file(self, filename):
        path = get_file(self, filename)
        if path is None:
            group = shared_group(self)
            if group and os.path.isfile(os.path.join(group, filename)):
                path = os.path.join(group, filename)
        return path

    def kiln_get_group(self, filename):
        found = get_group(self, filename)
        if found is not None:
            return found
        group = shared_group(self)
        if not group:
            return None
        try:
            with open(os.path.join(group, "__grp__" + filename), "r", encoding="utf-8") as f:
                children = json.load(f).get("child_paths")
        except (OSError, ValueError, AttributeError):
            return None
        if not isinstance(children, dict):
            return None
        # The paths were the publishing runner's; its files now lie beside the group file.
        out = {}
        for child, path in children.items():
            candidate = os.path.join(group, os.path.basename(str(path)))
            if os.path.isfile(candidate):
                out[child] = candidate
        return out

    manager.get_file = kiln_get_file
    manager.get_group = kiln_get_group
    manager._kiln_shared = shared_dir
