#!/usr/bin/env python3
"""Hermetic Python package indexes for lockstep's resolver suite and benchmark.

    py_index.py random SEED DIR      a generated dependency graph (backtracking, extras, markers,
                                     yanked files, pre-releases, Requires-Python)
    py_index.py training DIR         a graph shaped like a PyTorch training project (150+
                                     distributions, several versions each)
    py_index.py conflict DIR         the small graphs whose failures the suite asserts whole
    py_index.py torch DIR            torch 2.0.0 with its real nvidia-* Requires-Dist, for `stack:`
    py_index.py serve DIR            serves DIR on 127.0.0.1 (prints the port), as below

Each writes DIR/files/*.whl (real wheels: METADATA, WHEEL, RECORD, a module), DIR/files/*.metadata
(PEP 658), DIR/simple/NAME/index.html (PEP 503 with data-requires-python, data-yanked,
data-dist-info-metadata and data-core-metadata) and index.json (PEP 691 1.1, with sizes), and
DIR/requirements.in, the top-level requests, one per line. IndexHandler serves such a tree as
PyPI does: a directory with index.json answers clients that ask for PEP 691 JSON in JSON, others
get index.html (lib.sh's `start_http_server DIR py_index.py` uses it).
"""
import base64
import hashlib
import html
import http.server
import json
import os
import random
import sys
import zipfile


class IndexHandler(http.server.SimpleHTTPRequestHandler):
    """Static files, and PEP 691 content negotiation for directories that hold index.json. Project
    pages say `Cache-Control: max-age=600, public`, as PyPI's simple pages do."""

    def end_headers(self):
        if self.path.endswith("/"):
            self.send_header("Cache-Control", "max-age=600, public")
        super().end_headers()

    def send_head(self):
        path = self.translate_path(self.path)
        json_page = os.path.join(path, "index.json")
        if self.path.endswith("/") and os.path.isfile(json_page) and \
                "application/vnd.pypi.simple.v1+json" in self.headers.get("Accept", ""):
            f = open(json_page, "rb")
            self.send_response(200)
            self.send_header("Content-Type", "application/vnd.pypi.simple.v1+json")
            self.send_header("Content-Length", str(os.fstat(f.fileno()).st_size))
            self.end_headers()
            return f
        return super().send_head()

    def log_message(self, format, *args):
        pass


class Server(http.server.ThreadingHTTPServer):
    # A real index (PyPI's CDN, nginx) takes many connections at once; socketserver's default
    # backlog of 5 makes the kernel drop the SYNs of parallel clients, which then wait a second
    # to retry.
    request_queue_size = 128


def serve(root):
    import functools
    server = Server(("127.0.0.1", 0), functools.partial(IndexHandler, directory=root))
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


def normalize(name):
    out, dash = [], False
    for ch in name.lower():
        if ch in "-_.":
            dash = True
            continue
        if dash and out:
            out.append("-")
        dash = False
        out.append(ch)
    return "".join(out)


def write_wheel(path, info, meta, files, tag="py3-none-any", entry_points=None,
                compression=zipfile.ZIP_DEFLATED):
    """Writes the wheel PATH: FILES ({member: bytes}), then INFO/METADATA (the text META),
    INFO/WHEEL for TAG, INFO/entry_points.txt when given, and a RECORD with every member's sha256,
    at a fixed time."""
    members = dict(files)
    members[f"{info}/METADATA"] = meta.encode()
    members[f"{info}/WHEEL"] = \
        f"Wheel-Version: 1.0\nGenerator: lockstep-tests\nRoot-Is-Purelib: true\nTag: {tag}\n".encode()
    if entry_points:
        members[f"{info}/entry_points.txt"] = entry_points.encode()
    record = ""
    for member, data in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record += f"{member},sha256={digest},{len(data)}\n"
    record += f"{info}/RECORD,,\n"
    members[f"{info}/RECORD"] = record.encode()
    with zipfile.ZipFile(path, "w", compression) as z:
        for member, data in members.items():
            zi = zipfile.ZipInfo(member, date_time=(2024, 1, 1, 0, 0, 0))
            zi.external_attr = 0o644 << 16
            zi.compress_type = compression
            z.writestr(zi, data)


class Index:
    def __init__(self, root):
        self.root = root
        self.projects = {}  # normalized name -> list of file dicts
        os.makedirs(os.path.join(root, "files"), exist_ok=True)

    def wheel(self, name, version, requires=(), extras=None, requires_python=None, yanked=None,
              tag="py3-none-any", headers=()):
        """Writes one wheel of NAME VERSION whose METADATA lists REQUIRES (Requires-Dist lines)
        and EXTRAS ({extra: [requirement, ...]}), and HEADERS ("License: MIT") as they are."""
        dist = name.replace("-", "_").replace(".", "_")
        meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
        for h in headers:
            meta += h + "\n"
        if requires_python:
            meta += f"Requires-Python: {requires_python}\n"
        for r in requires:
            meta += f"Requires-Dist: {r}\n"
        for extra, reqs in (extras or {}).items():
            meta += f"Provides-Extra: {extra}\n"
            for r in reqs:
                marker = f'extra == "{extra}"'
                if ";" in r:
                    req, m = r.split(";", 1)
                    meta += f"Requires-Dist: {req.strip()}; ({m.strip()}) and {marker}\n"
                else:
                    meta += f"Requires-Dist: {r}; {marker}\n"
        filename = f"{dist}-{version}-{tag}.whl"
        path = os.path.join(self.root, "files", filename)
        write_wheel(path, f"{dist}-{version}.dist-info", meta,
                    {f"{dist}/__init__.py": f"VERSION = {version!r}\n".encode()}, tag=tag,
                    compression=zipfile.ZIP_STORED)
        with open(path + ".metadata", "wb") as f:
            f.write(meta.encode())
        with open(path, "rb") as f:
            data = f.read()
        self.projects.setdefault(normalize(name), []).append({
            "filename": filename,
            "sha256": hashlib.sha256(data).hexdigest(),
            "size": len(data),
            "metadata_sha256": hashlib.sha256(meta.encode()).hexdigest(),
            "requires_python": requires_python,
            "yanked": yanked,
        })

    def write(self, requirements):
        for project, files in sorted(self.projects.items()):
            d = os.path.join(self.root, "simple", project)
            os.makedirs(d, exist_ok=True)
            anchors = []
            entries = []
            for f in sorted(files, key=lambda f: f["filename"]):
                attrs = f' data-dist-info-metadata="sha256={f["metadata_sha256"]}"' \
                        f' data-core-metadata="sha256={f["metadata_sha256"]}"'
                if f["requires_python"]:
                    attrs += f' data-requires-python="{html.escape(f["requires_python"])}"'
                if f["yanked"] is not None:
                    attrs += f' data-yanked="{html.escape(f["yanked"])}"'
                anchors.append(f'<a href="../../files/{f["filename"]}#sha256={f["sha256"]}"{attrs}>'
                               f'{f["filename"]}</a><br>')
                entry = {
                    "filename": f["filename"],
                    "url": f"../../files/{f['filename']}",
                    "hashes": {"sha256": f["sha256"]},
                    "size": f["size"],
                    # (not "dist-info-metadata" too: pip 23.0 fails on its PEP 714 dict form)
                    "core-metadata": {"sha256": f["metadata_sha256"]},
                }
                if f["requires_python"]:
                    entry["requires-python"] = f["requires_python"]
                if f["yanked"] is not None:
                    entry["yanked"] = f["yanked"] or True
                entries.append(entry)
            with open(os.path.join(d, "index.html"), "w") as out:
                out.write("<!DOCTYPE html>\n<html><body>\n" + "\n".join(anchors) + "\n</body></html>\n")
            with open(os.path.join(d, "index.json"), "w") as out:
                json.dump({"meta": {"api-version": "1.1"}, "name": project, "files": entries}, out, indent=1)
        with open(os.path.join(self.root, "requirements.in"), "w") as out:
            out.write("".join(r + "\n" for r in requirements))


# ---- generated graphs ---------------------------------------------------------------------------

TRUE_MARKERS = ['python_version >= "3.8"', 'sys_platform == "linux"', 'platform_machine == "x86_64"']
FALSE_MARKERS = ['sys_platform == "win32"', 'python_version < "3.9"', 'platform_machine == "aarch64"']


def random_graph(seed, root):
    """A generated graph whose newest-first answer is unambiguous: among all its solutions (found
    by enumeration below) one has the newest version of every project it shares with any other.
    Graphs without such a solution are redrawn from the next sub-seed; graphs without any solution
    are kept (pip and lockstep must both refuse them)."""
    for attempt in range(200):
        graph = draw_graph(random.Random(seed * 1000 + attempt), f"g{seed}x")
        sols = solutions(graph)
        if sols is None:
            continue  # too many to enumerate
        if not sols or newest_solution(sols) is not None:
            break
    else:
        sys.exit(f"py_index.py: no unambiguous graph for seed {seed}")
    index = Index(root)
    for i, pkg in enumerate(graph["packages"]):
        for v in pkg["versions"]:
            reqs = [render(graph, d) for d in v["deps"]]
            extras = {e: [render(graph, d) for d in ds] for e, ds in v["extras"].items()} or None
            index.wheel(pkg["name"], v["version"], reqs, extras, v["requires_python"],
                        "broken build" if v["yanked"] else None)
    index.write([render(graph, d) for d in graph["requests"]])


def render(graph, dep):
    j, spec, extras, marker = dep
    text = graph["packages"][j]["name"] + (f"[{','.join(extras)}]" if extras else "") + spec
    return text + (f"; {marker}" if marker else "")


def draw_graph(rng, prefix):
    n = rng.randint(6, 12)
    spellings = ["{}", "{}", "{}", "Py_{}", "{}.Core", "{}-lib"]
    names = [rng.choice(spellings).format(f"{prefix}{i}") for i in range(n)]
    versions = []
    for i in range(n):
        vs = []
        for major in range(1, rng.randint(1, 4) + 1):
            for minor in range(rng.randint(1, 3)):
                vs.append(f"{major}.{minor}")
        if rng.random() < 0.3:
            vs.append(f"{int(vs[-1].split('.')[0]) + 1}.0b1")  # a pre-release newer than every final
        versions.append(vs)
    provides = [rng.random() < 0.3 and i + 1 < n for i in range(n)]

    def spec_for(j, request=False):
        vs = versions[j]
        v = rng.choice(vs)
        kind = rng.random() * (0.88 if request else 1.0)
        if kind < 0.2:
            return ""
        if kind < 0.4:
            return f">={v}"
        if kind < 0.55:
            return f"<{v}" if v != vs[0] else f"<={v}"
        if kind < 0.65:
            return f"=={v.split('.')[0]}.*"
        if kind < 0.72:
            return f"!={v}"
        if kind < 0.8:
            return f"~={v}" if "b" not in v else f">={v}"
        if kind < 0.88:
            return f">={vs[0]},<{v}" if v != vs[0] else f">={v}"
        if kind < 0.93:
            return f"=={v}"
        return f">={int(v.split('.')[0]) + 5}.0"  # nothing has it: forces backtracking

    def dep_on(j):
        extras = ["fast"] if provides[j] and rng.random() < 0.15 else []
        marker = rng.choice(TRUE_MARKERS + FALSE_MARKERS) if rng.random() < 0.15 else None
        return (j, spec_for(j), extras, marker)

    packages = []
    for i in range(n):
        finals = [v for v in versions[i] if "b" not in v]
        yanked = finals[-1] if len(finals) > 1 and rng.random() < 0.25 else None
        pkg = {"name": names[i], "versions": []}
        for v in versions[i]:
            deps = [dep_on(j) for j in range(i + 1, n) if rng.random() < 0.25]
            extras = {}
            if provides[i]:
                k = rng.randint(i + 1, n - 1)
                extras["fast"] = [dep_on(k)]
            rp = ">=3.12" if rng.random() < 0.08 else (">=3.8" if rng.random() < 0.3 else None)
            pkg["versions"].append({"version": v, "deps": deps, "extras": extras, "requires_python": rp,
                                    "yanked": v == yanked})
        packages.append(pkg)
    requests = []
    for i in sorted(rng.sample(range(min(n, 5)), rng.randint(1, min(n, 4)))):
        spec = spec_for(i, request=True) if rng.random() < 0.5 else ""
        requests.append((i, spec, ["fast"] if provides[i] and rng.random() < 0.2 else [], None))
    return {"packages": packages, "requests": requests}


def solutions(graph, limit=100000):
    """Every set of versions pip could install for the graph's requests (each project present only
    when something asks for it), as dicts index -> version; None past `limit` search nodes. pip's
    candidate rules apply: Requires-Python, yanked files only for an exact pin, pre-releases only
    when a specifier names one (or nothing constrains the project and it has no final release)."""
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.specifiers import SpecifierSet
    from pip._vendor.packaging.version import Version
    env = {"python_version": "3.11", "python_full_version": "3.11.2", "sys_platform": "linux",
           "platform_machine": "x86_64", "os_name": "posix", "platform_system": "Linux",
           "implementation_name": "cpython", "platform_python_implementation": "CPython"}
    pkgs = graph["packages"]
    n = len(pkgs)
    out = []
    nodes = [0]

    def applies(marker, extra=""):
        return marker is None or Marker(marker).evaluate(dict(env, extra=extra))

    def candidates(i, specs):
        merged = SpecifierSet(",".join(s for s in specs if s != "*"))
        pinned = any(c.operator == "===" or (c.operator == "==" and not c.version.endswith(".*")) for c in merged)
        vs = [v for v in pkgs[i]["versions"]
              if v["requires_python"] is None or SpecifierSet(v["requires_python"]).contains("3.11")]
        ok = list(merged.filter([v["version"] for v in vs]))
        matching = [v for v in vs if v["version"] in ok]
        all_yanked = bool(matching) and all(v["yanked"] for v in matching)
        return [v for v in matching if not v["yanked"] or (all_yanked and pinned)]

    def walk(i, specs, extras, chosen):
        nodes[0] += 1
        if nodes[0] > limit:
            raise OverflowError
        if i == n:
            out.append(dict(chosen))
            return
        if not specs[i]:
            walk(i + 1, specs, extras, chosen)
            return
        for v in candidates(i, specs[i]):
            s2 = [list(x) for x in specs]
            e2 = [set(x) for x in extras]
            deps = [d for d in v["deps"] if applies(d[3])]
            for e in extras[i]:
                deps += [d for d in v["extras"].get(e, []) if applies(d[3], e)]
            for j, spec, ex, _ in deps:
                s2[j].append(spec or "*")
                e2[j].update(ex)
            chosen[i] = Version(v["version"])
            walk(i + 1, s2, e2, chosen)
            del chosen[i]

    specs = [[] for _ in range(n)]
    extras = [set() for _ in range(n)]
    for j, spec, ex, _ in graph["requests"]:
        specs[j].append(spec or "*")
        extras[j].update(ex)
    # "*" marks "asked for, without a specifier".
    try:
        walk(0, specs, extras, {})
    except OverflowError:
        return None
    return out


def newest_solution(sols):
    """The solution with the newest version of every project it shares with each other one."""
    for s in sols:
        if all(all(s[k] >= t[k] for k in s.keys() & t.keys()) for t in sols):
            return s
    return None


# A training project: name -> (number of versions, dependencies as (name, kind)); kind "any" takes
# any version, "min" a lower bound on a middle version, "range" a lower and an upper bound, "pin"
# an exact version.
TRAINING = {
    "torch": ["filelock", "typing-extensions", "sympy", "networkx", "jinja2", "fsspec", "triton:pin",
              "nvidia-cuda-nvrtc-cu12:pin", "nvidia-cuda-runtime-cu12:pin", "nvidia-cuda-cupti-cu12:pin",
              "nvidia-cudnn-cu12:pin", "nvidia-cublas-cu12:pin", "nvidia-cufft-cu12:pin",
              "nvidia-curand-cu12:pin", "nvidia-cusolver-cu12:pin", "nvidia-cusparse-cu12:pin",
              "nvidia-nccl-cu12:pin", "nvidia-nvtx-cu12:pin"],
    "nvidia-cudnn-cu12": ["nvidia-cublas-cu12"],
    "nvidia-cusolver-cu12": ["nvidia-cublas-cu12", "nvidia-nvjitlink-cu12", "nvidia-cusparse-cu12"],
    "nvidia-cusparse-cu12": ["nvidia-nvjitlink-cu12"],
    "nvidia-cufft-cu12": ["nvidia-nvjitlink-cu12"],
    "triton": ["filelock"],
    "sympy": ["mpmath:range"],
    "jinja2": ["markupsafe:min"],
    "torchvision": ["numpy", "torch:pin", "pillow:min"],
    "torchaudio": ["torch:pin"],
    "transformers": ["filelock", "huggingface-hub:range", "numpy:min", "packaging:min", "pyyaml:min",
                     "regex", "requests", "tokenizers:range", "safetensors:min", "tqdm:min"],
    "tokenizers": ["huggingface-hub:range"],
    "huggingface-hub": ["filelock", "fsspec:min", "packaging:min", "pyyaml:min", "requests", "tqdm:min",
                        "typing-extensions:min"],
    "datasets": ["filelock", "numpy:min", "pyarrow:min", "dill:range", "pandas", "requests:min", "tqdm:min",
                 "xxhash", "multiprocess", "fsspec:range", "aiohttp", "huggingface-hub:min", "packaging",
                 "pyyaml:min"],
    "multiprocess": ["dill:min"],
    "pyarrow": ["numpy:min"],
    "pandas": ["numpy:min", "python-dateutil:min", "pytz:min", "tzdata:min"],
    "python-dateutil": ["six:min"],
    "aiohttp": ["aiosignal:min", "attrs:min", "frozenlist:min", "multidict:range", "yarl:range",
                "async-timeout:range; python_version < \"3.11\"", "aiohappyeyeballs:min"],
    "aiosignal": ["frozenlist:min"],
    "yarl": ["idna:min", "multidict:min", "propcache:min"],
    "requests": ["charset-normalizer:range", "idna:range", "urllib3:range", "certifi:min"],
    "accelerate": ["numpy:min", "packaging:min", "psutil", "pyyaml", "torch:min", "huggingface-hub",
                   "safetensors:min"],
    "peft": ["numpy:min", "packaging:min", "psutil", "pyyaml", "torch:min", "transformers", "tqdm",
             "accelerate:min", "safetensors", "huggingface-hub:min"],
    "evaluate": ["datasets:min", "numpy:min", "dill", "pandas", "requests:min", "tqdm:min", "xxhash",
                 "multiprocess", "fsspec:min", "huggingface-hub:min", "packaging"],
    "lightning": ["pyyaml:min", "fsspec:min", "lightning-utilities:min", "numpy:min", "packaging:min",
                  "torch:min", "torchmetrics:min", "tqdm:min", "typing-extensions:min", "pytorch-lightning"],
    "pytorch-lightning": ["torch:min", "tqdm", "pyyaml", "fsspec", "torchmetrics", "packaging",
                          "typing-extensions", "lightning-utilities"],
    "torchmetrics": ["numpy:min", "packaging:min", "torch:min", "lightning-utilities:min"],
    "lightning-utilities": ["packaging:min", "typing-extensions", "setuptools"],
    "hydra-core": ["omegaconf:range", "antlr4-python3-runtime:range", "packaging"],
    "omegaconf": ["antlr4-python3-runtime:range", "pyyaml:min"],
    "wandb": ["click:min", "gitpython:min", "requests:range", "psutil:min", "sentry-sdk:min",
              "docker-pycreds:min", "pyyaml", "setproctitle", "setuptools", "protobuf:range",
              "platformdirs", "pydantic:range"],
    "gitpython": ["gitdb:range"],
    "gitdb": ["smmap:range"],
    "sentry-sdk": ["urllib3:min", "certifi"],
    "docker-pycreds": ["six:min"],
    "pydantic": ["annotated-types:min", "pydantic-core:pin", "typing-extensions:min"],
    "pydantic-core": ["typing-extensions:min"],
    "tensorboard": ["absl-py:min", "grpcio:min", "markdown:min", "numpy:min", "packaging", "protobuf:range",
                    "setuptools:min", "six:min", "tensorboard-data-server:range", "werkzeug:min"],
    "werkzeug": ["markupsafe:min"],
    "markdown": [],
    "rich": ["markdown-it-py:min", "pygments:range"],
    "markdown-it-py": ["mdurl:range"],
    "timm": ["torch", "torchvision", "pyyaml", "huggingface-hub", "safetensors"],
    "einops": [],
    "deepspeed": ["hjson", "ninja", "numpy", "packaging:min", "psutil", "py-cpuinfo", "pydantic:min", "torch",
                  "tqdm", "nvidia-ml-py"],
    "scikit-learn": ["numpy:min", "scipy:min", "joblib:min", "threadpoolctl:min"],
    "scipy": ["numpy:range"],
    "matplotlib": ["contourpy:min", "cycler:min", "fonttools:min", "kiwisolver:min", "numpy:min",
                   "packaging:min", "pillow:min", "pyparsing:range", "python-dateutil:min"],
    "contourpy": ["numpy:min"],
    "seaborn": ["numpy:range", "pandas:min", "matplotlib:range"],
    "sentencepiece": [],
    "nltk": ["click", "joblib", "regex:min", "tqdm"],
    "ipykernel": ["comm:min", "debugpy:min", "ipython:min", "jupyter-client:min", "jupyter-core:min",
                  "matplotlib-inline:min", "nest-asyncio", "packaging", "psutil", "pyzmq:min", "tornado:min",
                  "traitlets:min"],
    "ipython": ["decorator", "jedi:min", "matplotlib-inline", "pexpect:min; sys_platform != \"win32\"",
                "prompt-toolkit:range", "pygments:min", "stack-data", "traitlets:min",
                "colorama; sys_platform == \"win32\"", "typing-extensions; python_version < \"3.12\""],
    "jedi": ["parso:range"],
    "pexpect": ["ptyprocess:min"],
    "prompt-toolkit": ["wcwidth"],
    "stack-data": ["executing:min", "asttokens:min", "pure-eval"],
    "asttokens": ["six:min"],
    "matplotlib-inline": ["traitlets"],
    "jupyter-client": ["jupyter-core:min", "python-dateutil:min", "pyzmq:min", "tornado:min", "traitlets:min"],
    "jupyter-core": ["platformdirs:min", "traitlets:min"],
    "comm": ["traitlets:min"],
    "onnx": ["numpy:min", "protobuf:min"],
    "onnxruntime": ["coloredlogs", "flatbuffers", "numpy:min", "packaging", "protobuf", "sympy"],
    "coloredlogs": ["humanfriendly:min"],
    "opencv-python-headless": ["numpy:min"],
    "albumentations": ["numpy:min", "scipy:min", "pyyaml", "pydantic:min", "opencv-python-headless:min",
                       "albucore:pin"],
    "albucore": ["numpy:min", "opencv-python-headless:min"],
    "typer": ["click:min", "typing-extensions:min", "rich:min", "shellingham:min"],
    "fastapi": ["starlette:range", "pydantic:range", "typing-extensions:min"],
    "starlette": ["anyio:range"],
    "anyio": ["idna:min", "sniffio:min"],
    "uvicorn": ["click:min", "h11:min"],
    "httpx": ["anyio", "certifi", "httpcore:range", "idna", "sniffio"],
    "httpcore": ["certifi", "h11:range"],
    "mlflow-skinny": ["cachetools:range", "click:range", "cloudpickle:range", "databricks-sdk:range",
                      "gitpython:range", "importlib-metadata:range", "opentelemetry-api:range",
                      "opentelemetry-sdk:range", "packaging:range", "protobuf:range", "pyyaml:range",
                      "requests:range", "sqlparse:range"],
    "databricks-sdk": ["requests:range", "google-auth:range"],
    "google-auth": ["cachetools:range", "pyasn1-modules:min", "rsa:range"],
    "pyasn1-modules": ["pyasn1:range"],
    "rsa": ["pyasn1:min"],
    "importlib-metadata": ["zipp:min"],
    "opentelemetry-api": ["deprecated:min", "importlib-metadata:range"],
    "opentelemetry-sdk": ["opentelemetry-api:pin", "opentelemetry-semantic-conventions:pin", "typing-extensions:min"],
    "opentelemetry-semantic-conventions": ["opentelemetry-api:pin", "deprecated:min"],
    "deprecated": ["wrapt:range"],
    "optuna": ["alembic:min", "colorlog", "numpy", "packaging:min", "sqlalchemy:min", "tqdm", "pyyaml"],
    "alembic": ["sqlalchemy:min", "mako", "typing-extensions:min"],
    "sqlalchemy": ["greenlet:min; platform_machine == \"x86_64\"", "typing-extensions:min"],
    "mako": ["markupsafe:min"],
    "ray": ["click:min", "filelock", "jsonschema", "msgpack:range", "packaging", "protobuf:min", "pyyaml",
            "aiosignal", "frozenlist", "requests"],
    "jsonschema": ["attrs:min", "jsonschema-specifications:min", "referencing:min", "rpds-py:min"],
    "jsonschema-specifications": ["referencing:min"],
    "referencing": ["attrs:min", "rpds-py:min"],
    "bitsandbytes": ["torch", "numpy"],
    "xformers": ["numpy", "torch:pin"],
    "flash-attn": ["torch", "einops"],
    # (no "pip" or "wheel": the suite installs the solution into a venv whose own pip must survive)
    "tabulate": [],
    "toolz": [],
}

# Leaves and packages that only appear as dependencies.
LEAVES = ["filelock", "typing-extensions", "networkx", "fsspec", "mpmath", "markupsafe", "numpy", "pillow",
          "packaging", "pyyaml", "regex", "safetensors", "tqdm", "dill", "xxhash", "pytz", "tzdata", "six",
          "attrs", "frozenlist", "multidict", "async-timeout", "aiohappyeyeballs", "propcache", "idna",
          "charset-normalizer", "urllib3", "certifi", "psutil", "setuptools", "antlr4-python3-runtime",
          "click", "smmap", "setproctitle", "protobuf", "platformdirs", "annotated-types", "absl-py", "grpcio",
          "tensorboard-data-server", "mdurl", "pygments", "hjson", "ninja", "py-cpuinfo", "nvidia-ml-py",
          "joblib", "threadpoolctl", "cycler", "fonttools", "kiwisolver", "pyparsing", "decorator", "parso",
          "ptyprocess", "wcwidth", "executing", "pure-eval", "traitlets", "nest-asyncio", "pyzmq", "tornado",
          "debugpy", "colorama", "humanfriendly", "flatbuffers", "shellingham", "sniffio", "h11", "cachetools",
          "cloudpickle", "sqlparse", "pyasn1", "zipp", "wrapt", "colorlog", "greenlet", "msgpack",
          "rpds-py", "nvidia-cuda-nvrtc-cu12", "nvidia-cuda-runtime-cu12", "nvidia-cuda-cupti-cu12",
          "nvidia-cublas-cu12", "nvidia-curand-cu12", "nvidia-nccl-cu12", "nvidia-nvtx-cu12",
          "nvidia-nvjitlink-cu12"]

TRAINING_REQUESTS = ["torchvision", "torchaudio", "datasets", "accelerate",
                     "peft", "evaluate", "lightning", "hydra-core", "wandb", "tensorboard", "rich", "timm",
                     "einops", "deepspeed", "scikit-learn", "seaborn", "sentencepiece", "nltk", "ipykernel",
                     "onnx", "onnxruntime", "albumentations", "typer", "fastapi", "uvicorn", "httpx",
                     "mlflow-skinny", "optuna", "ray", "bitsandbytes", "xformers", "flash-attn", "tabulate",
                     "toolz", "matplotlib", "pandas>=2.0"]


def training_graph(root):
    rng = random.Random(751)
    graph = dict(TRAINING)
    for leaf in LEAVES:
        graph.setdefault(leaf, [])
    index = Index(root)
    versions = {}
    for name in sorted(graph):
        count = rng.randint(4, 12)
        versions[name] = [f"{1 + k // 3}.{k % 3}" for k in range(count)]
    for name in sorted(graph):
        vs = versions[name]
        for pos, v in enumerate(vs):
            reqs = []
            for dep in graph[name]:
                dep, _, marker = dep.partition(";")
                dep_name, _, kind = dep.partition(":")
                dvs = versions[dep_name]
                # Newer releases of a project ask for newer dependencies, as real projects do.
                mid = dvs[min(len(dvs) - 1, pos * len(dvs) // len(vs))]
                spec = ""
                if kind == "min":
                    spec = f">={dvs[min(len(dvs) - 1, pos * len(dvs) // (2 * len(vs)))]}"
                elif kind == "range":
                    lo = dvs[pos * len(dvs) // (2 * len(vs))]
                    spec = f">={lo},<{int(mid.split('.')[0]) + 2}"
                elif kind == "pin":
                    # Aligned from the newest: each release pins the dependency's release of its
                    # rank (torchvision's newest pins torch's newest, the one before the one before).
                    spec = f"=={dvs[max(0, len(dvs) - len(vs) + pos)]}"
                reqs.append(dep_name + spec + (f";{marker}" if marker else ""))
            extras = None
            if name == "transformers":
                extras = {"torch": ["torch>=2.0", "accelerate>=1.0"], "sentencepiece": ["sentencepiece>=1.0"]}
            index.wheel(name, v, reqs, extras)
    # torch pinned to its second newest release; transformers from its middle one.
    requests = [f"torch=={versions['torch'][-2]}",
                f"transformers>={versions['transformers'][len(versions['transformers']) // 2]}"]
    index.write(requests + TRAINING_REQUESTS + ["transformers[torch,sentencepiece]"])


def conflict_graphs(root):
    """Two small failures: a dependency conflict, and a project with no wheel in range."""
    index = Index(root)
    index.wheel("transformers", "4.44.0", ["tokenizers>=0.19,<0.20", "huggingface-hub>=0.23"])
    index.wheel("transformers", "4.43.0", ["tokenizers>=0.19,<0.20", "huggingface-hub>=0.23"])
    index.wheel("tokenizers", "0.19.1", ["huggingface-hub>=0.16.4,<1.0"])
    index.wheel("tokenizers", "0.20.0", ["huggingface-hub>=0.16.4,<1.0"])
    index.wheel("huggingface-hub", "0.24.6", [])
    index.wheel("huggingface-hub", "1.0.0", [])
    index.wheel("newer-only", "2.0", [], requires_python=">=3.12")
    index.write(["transformers>=4.43", "huggingface-hub>=1.0"])


# torch 2.0.0's Requires-Dist on Linux x86_64 (PyPI's manylinux wheel), without nvidia-nvtx-cu11: the
# recipe (recipes/pytorch/pytorch.yaml, 2.0.0 cu117) pins it, so lockstep warns that the pin is stale.
TORCH_200 = ["filelock", "typing-extensions", "sympy", "networkx", "jinja2",
             "nvidia-cuda-nvrtc-cu11==11.7.99", "nvidia-cuda-runtime-cu11==11.7.99",
             "nvidia-cuda-cupti-cu11==11.7.101", "nvidia-cudnn-cu11==8.5.0.96", "nvidia-cublas-cu11==11.10.3.66",
             "nvidia-cufft-cu11==10.9.0.58", "nvidia-curand-cu11==10.2.10.91", "nvidia-cusolver-cu11==11.4.0.1",
             "nvidia-cusparse-cu11==11.7.4.91", "nvidia-nccl-cu11==2.14.3", "triton==2.0.0"]


def torch_graph(root):
    """A torch 2.0.0 whose metadata, not the recipe, lists its nvidia-* wheels."""
    index = Index(root)
    linux = 'platform_system == "Linux" and platform_machine == "x86_64"'
    index.wheel("torch", "2.0.0", [r if r.startswith(("filelock", "typing", "sympy", "networkx", "jinja2"))
                                   else f"{r}; {linux}" for r in TORCH_200])
    for r in TORCH_200[5:] + ["nvidia-nvtx-cu11==11.7.91"]:
        name, version = r.split("==")
        index.wheel(name, version, ["setuptools", "wheel"] if name.startswith("nvidia") else [])
    for name in ["filelock", "typing-extensions", "networkx", "mpmath", "markupsafe", "setuptools", "wheel"]:
        index.wheel(name, "1.0", [])
    index.wheel("sympy", "1.12", ["mpmath>=0.19"])
    index.wheel("jinja2", "3.1.2", ["markupsafe>=1.0"])
    index.write(["torch==2.0.0"])


def pigeonhole(n, root):
    """Issue 34's hostile index: N projects pg1..pgN with N-1 versions (holes) each; pgI==h requires
    pgJ!=h for every other J, and the request names them all. No solution exists, and proving it
    takes a solver time exponential in N."""
    index = Index(root)
    for i in range(1, n + 1):
        for h in range(1, n):
            index.wheel(f"pg{i}", f"{h}.0", [f"pg{j}!={h}.0" for j in range(1, n + 1) if j != i])
    index.write([f"pg{i}" for i in range(1, n + 1)])


def sbom_index(root):
    """Wheels declaring their licenses each way METADATA can (tests/cli/test_sbom.sh)."""
    idx = Index(root)
    idx.wheel("alpha", "1.0", requires=["beta>=2", "gamma"],
              headers=["License-Expression: mit OR Apache-2.0"])
    idx.wheel("beta", "2.0", headers=["License: BSD", "Classifier: License :: OSI Approved :: MIT License"])
    idx.wheel("gamma", "0.1", headers=["License: Copyright (c) 2024 Gamma Ltd. All rights reserved."])
    idx.write(["alpha"])


def main():
    what = sys.argv[1]
    if what == "random":
        random_graph(int(sys.argv[2]), sys.argv[3])
    elif what == "training":
        training_graph(sys.argv[2])
    elif what == "conflict":
        conflict_graphs(sys.argv[2])
    elif what == "torch":
        torch_graph(sys.argv[2])
    elif what == "pigeonhole":
        pigeonhole(int(sys.argv[2]), sys.argv[3])
    elif what == "sbom":
        sbom_index(sys.argv[2])
    elif what == "serve":
        serve(sys.argv[2])
    else:
        sys.exit(f"py_index.py: unknown graph {what!r}")


if __name__ == "__main__":
    main()
