#!/usr/bin/python3
"""A fake OCI registry that misbehaves on purpose, for the hostile-registry tests.

Started by tests/cli/registry.sh (`registry_up NAME hostile`, which exports REG_NAME_HOST,
REG_NAME_HOST2, REG_NAME_DIGEST, REG_NAME_INFO and REG_NAME_LOG); usable alone. Python 3 standard
library only. Listens on 127.0.0.1 (--addr) at two free ports: the registry, and a second listener
("another host") that the `redirect-offhost` case sends blobs to.

It serves one tiny valid image, built at start: a gzip layer (hello.txt and a 256 KiB data.bin of
pseudo-random bytes), its config and an OCI image manifest; its digest is `manifest_digest` in the
info file (REG_NAME_DIGEST). Every case starts from that image.

The case is the repository's first path component: `resume`, `resume/a` and `resume/b/c` all behave
as `resume`; counters ("the first time") are kept per whole repository name, so a test that wants a
fresh start uses a fresh name (`resume/t2`), or POST /_hostile/reset clears them all. Any tag works
(`:latest` or anything); a digest reference must be the case's manifest digest. With `--mode CASE`,
every repository behaves as CASE whatever its name, and for auth-loop, rate-limit, flaky-5xx, stall
and stall-headers the /v2/ ping misbehaves the same way.

Blobs served normally honour `Range: bytes=N-` / `bytes=N-M` (206, Content-Range) in every case, as a
real registry does; manifests and blobs answer HEAD with their headers.

Expected client behaviour (lockstep's exit codes: 2 bad content, 3 unreachable or failing
registry); in every failing case nothing is stored and nothing half-published:

  ok                  The valid image. Pull succeeds.
  digest-mismatch     The manifest body is the valid one plus an annotation; Docker-Content-Digest
                      still claims the valid digest. Pulled by digest (`digest-mismatch@DIGEST`):
                      exit 2 (body does not match the digest asked for). By tag the header lies too.
  blob-mismatch       The valid manifest; the layer blob has one byte flipped in the middle (same
                      size). Exit 2, the layer's digest does not match; no blob stored.
  manifest-too-big    A valid OCI manifest padded with a ~6 MiB annotation (--big-manifest-bytes),
                      honest Content-Length. Exit 2 (over the manifest size cap); the client should
                      not read it all.
  manifest-too-big-nolength  The same without Content-Length (read until close): the cap must be
                      enforced while reading. Exit 2.
  schema1             A Docker schema1 manifest (application/vnd.docker.distribution.manifest.v1+
                      prettyjws), whatever Accept said. Exit 2 with a message saying what to do.
  redirect-loop       Every blob GET/HEAD redirects (307) to the same blob with ?loop=1, which
                      redirects back: a cycle. Exit 3 after a bounded number of redirects.
  redirect-offhost    Needs Authorization (any Basic or Bearer) on the registry, else 401 with a
                      Basic challenge. Blobs redirect (307) to http://HOST2/blobs/DIGEST?X-Amz-
                      Signature=fake on the second listener, which refuses (400, as S3 does) a
                      request that carries an Authorization header. The log says auth=present or
                      auth=absent for each request. Pull succeeds, and listener 2 logged only
                      auth=absent.
  length-long         Blob GETs declare Content-Length 1000 bytes more than they send, then close,
                      every time (a Range is ignored). Exit 3: the transfer never completes (after
                      bounded retries). A client that compares Content-Length with the descriptor's
                      size before reading may stop at once with exit 2; nothing stored either way.
  length-short        Blob GETs declare fewer bytes than the blob (size - 100, or half of a small
                      blob) and send the whole blob, then close. Exit 2: what HTTP delivers does not
                      match the descriptor's size and digest.
  gzip-bomb           Its own manifest: one tar+gzip layer of ~16 MiB that expands to ~16 GiB
                      (--bomb-bytes): tar members bomb-0, bomb-1... of zeros, at most 8 GiB - 1 MiB
                      each, a valid gzip stream (CRC and size right). The config's diff_id is a
                      placeholder (sha256 of nothing), not the real one. Exit 2 when the client's
                      bound on uncompressed bytes stops it, long before the end.
  stall               Blob GETs send headers (honest Content-Length) and 10 bytes, then nothing
                      (for --stall-seconds, default 600, then close). Exit 3 after the client's
                      read timeout.
  stall-manifest      The same on manifest GETs.
  stall-headers       Manifest GETs are read and never answered (no status line). Exit 3.
  auth-loop           Every request on the repository: 401, `WWW-Authenticate: Bearer realm=
                      "http://HOST/token?svc=hostile",service="hostile",scope="repository:REPO:pull"`;
                      /token hands out tokens (never-works-N) that never work. Exit 3 after a
                      bounded number of token fetches (count GET /token in the log).
  bad-digest          The layer's digest in the manifest is "sha256:xyz". Exit 2, no blob request.
  bad-digest-md5      The layer's digest is "md5:d41d8cd98f00b204e9800998ecf8427e". Exit 2, no blob
                      request.
  bad-digest-traversal  The layer's digest is "sha256:../../../../../../../../tmp/lockstep-hostile-
                      traversal". Exit 2, no blob request, no such file made.
  bad-digest-short    The config's digest has 63 hex digits. Exit 2, no blob request.
  rate-limit          The first two GETs of a manifest (per repository and reference) answer 429
                      with Retry-After: 1; the third succeeds. Pull succeeds after >= 2 s; the log
                      shows attempt=1,2 (429) and attempt=3 (200).
  flaky-5xx           The first GET of the manifest answers 500, the first GET of each blob 503;
                      then success. Pull succeeds; the log shows each.
  resume              The first GET of the layer blob (per repository) sends 200 with the full Content-Length and
                      Accept-Ranges: bytes, half the bytes, then drops the connection. Later GETs
                      honour `Range: bytes=N-` (and N-M) with 206 and Content-Range; without Range,
                      200 and the whole blob. Pull succeeds; the log shows the Range received
                      (range=bytes=N-) on a 206.
  realm-offhost       Every request on the repository: 401 with `WWW-Authenticate: Bearer realm=
                      "http://HOST2/token"` (the second listener, plain HTTP, another port), which
                      hands out a token and logs auth=present or auth=absent. With credentials for
                      the registry and --tls-verify=false for it: exit 3, the credentials are not
                      sent over plain HTTP to another host (listener 2 logs nothing).
  many-layers         Its own manifest: the valid layer listed 20,000 times, and a config with as
                      many diff_ids. Exit 2 (more layers than an image may have), no blob request.
  repeated-layer      The same with 500 copies: within the bound. Pull succeeds; unpacking applies the
                      layer once.
  upload-offhost      A registry to push to that needs Authorization (any Basic or Bearer), else 401
                      with a Basic challenge; it has no blob and no manifest (GET and HEAD: 404). A
                      blob upload POST answers 202 with `Location: http://HOST2/upload/N` on the
                      second listener, which takes the PUT (201) and logs auth=present or
                      auth=absent; PATCH there answers 202 with its Range. A manifest PUT on the
                      registry answers 201. Push succeeds, and listener 2 logged only auth=absent.

Log (stdout, one line per request, flushed; the access-log shape registry_requests reads):
  127.0.0.1 - - [TIME] "METHOD URI HTTP/1.1" STATUS SIZE listener=1|2 case=CASE auth=present|absent
  range=RANGE|- attempt=N
SIZE is the Content-Length sent ("-" when none). A request that never gets an answer (stall-headers)
is logged with status 000.

Other endpoints: GET /v2/ (200 {}), GET /token (auth-loop's realm), POST /_hostile/reset (clears the
counters), GET /_hostile/info (the info file's content). Anything else: 404/405 with an OCI error.
Options: --info FILE (written once both listeners listen: ports, digests, sizes; its presence says
the registry is up), --addr IP (127.0.0.1), --mode CASE, --bomb-bytes N, --big-manifest-bytes N, --stall-seconds N,
--tls-cert PEM --tls-key PEM (the first listener over HTTPS; the second stays plain HTTP).
"""

import argparse
import datetime
import gzip
import hashlib
import http.server
import io
import json
import os
import platform
import re
import socket
import sys
import tarfile
import threading
import zlib

CASES = [
    "ok", "digest-mismatch", "blob-mismatch", "manifest-too-big", "manifest-too-big-nolength",
    "schema1", "redirect-loop", "redirect-offhost", "length-long", "length-short", "gzip-bomb",
    "stall", "stall-manifest", "stall-headers", "auth-loop", "bad-digest", "bad-digest-md5",
    "bad-digest-traversal", "bad-digest-short", "rate-limit", "flaky-5xx", "resume", "upload-offhost",
    "realm-offhost", "many-layers", "repeated-layer",
]
PING_CASES = {"auth-loop", "rate-limit", "flaky-5xx", "stall", "stall-headers"}

OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
SCHEMA1 = "application/vnd.docker.distribution.manifest.v1+prettyjws"
EMPTY_SHA256 = "sha256:" + hashlib.sha256(b"").hexdigest()
MIB = 1 << 20


def sha256(data):
    return "sha256:" + hashlib.sha256(data).hexdigest()


def canonical(obj):
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def host_arch():
    machine = platform.machine()
    return {"x86_64": "amd64", "aarch64": "arm64", "ppc64le": "ppc64le", "s390x": "s390x"}.get(machine, machine)


# ---- the valid image -------------------------------------------------------------------------------
def pseudo_random(n, seed):
    out = bytearray()
    counter = 0
    while len(out) < n:
        out += hashlib.sha256(seed + counter.to_bytes(8, "big")).digest()
        counter += 1
    return bytes(out[:n])


def tar_bytes(members):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def make_manifest(config_blob, layers, annotations=None):
    manifest = {
        "schemaVersion": 2,
        "mediaType": OCI_MANIFEST,
        "config": {"mediaType": OCI_CONFIG, "digest": sha256(config_blob), "size": len(config_blob)},
        "layers": [{"mediaType": OCI_LAYER_GZIP, "digest": d, "size": s} for d, s in layers],
    }
    if annotations:
        manifest["annotations"] = annotations
    return manifest


def make_config(diff_ids):
    return canonical({
        "architecture": host_arch(),
        "os": "linux",
        "config": {"Cmd": ["/bin/sh"], "Env": ["PATH=/bin"]},
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
        "history": [{"created_by": "tests/cli/hostile_registry.py"}],
    })


# ---- the gzip bomb -----------------------------------------------------------------------------------
def _gf2_times(mat, vec):
    total, i = 0, 0
    while vec:
        if vec & 1:
            total ^= mat[i]
        vec >>= 1
        i += 1
    return total


def _gf2_square(mat):
    return [_gf2_times(mat, mat[n]) for n in range(32)]


def crc32_combine(crc1, crc2, len2):
    """zlib's crc32_combine: the CRC of A+B from crc(A), crc(B) and len(B)."""
    if len2 <= 0:
        return crc1
    odd = [0xEDB88320] + [1 << n for n in range(31)]
    even = _gf2_square(odd)
    odd = _gf2_square(even)
    while True:
        even = _gf2_square(odd)
        if len2 & 1:
            crc1 = _gf2_times(even, crc1)
        len2 >>= 1
        if not len2:
            break
        odd = _gf2_square(even)
        if len2 & 1:
            crc1 = _gf2_times(odd, crc1)
        len2 >>= 1
        if not len2:
            break
    return crc1 ^ crc2


def crc32_zeros(n, one_mib_crc):
    """CRC-32 of n MiB of zeros, by doubling."""
    result, result_len = 0, 0
    power, power_len = one_mib_crc, MIB
    while n:
        if n & 1:
            result = crc32_combine(result, power, power_len) if result_len else power
            result_len += power_len
        power = crc32_combine(power, power, power_len)
        power_len *= 2
        n >>= 1
    return result


class Bomb:
    """A tar+gzip layer of zero-filled members, built from repeated deflate blocks: the compressed
    stream is held as a list of (bytes, repeat) pieces, never expanded."""

    def __init__(self, total_bytes):
        member_max = 8 * 1024 * MIB - MIB  # ustar's octal size field holds < 8 GiB
        total_mib = max(1, total_bytes // MIB)
        deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
        zero_mib = bytes(MIB)

        def flushed(data):
            return deflate.compress(data) + deflate.flush(zlib.Z_FULL_FLUSH)

        # After a full flush the compressor starts afresh, so a MiB of zeros compresses the same way
        # every time; check it rather than trust it.
        samples = [flushed(zero_mib) for _ in range(3)]
        if samples[1] != samples[2] or samples[0] != samples[1]:
            raise SystemExit("hostile_registry: zlib does not repeat its output after a full flush")
        chunk = samples[0]
        deflate = zlib.compressobj(9, zlib.DEFLATED, -15, 9)
        one_mib_crc = zlib.crc32(zero_mib)
        self.pieces = [(b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x02\xff", 1)]  # gzip header, mtime 0
        crc, length = 0, 0
        left, index = total_mib, 0
        while left:
            mib = min(left, member_max // MIB)
            header = self._tar_header(f"bomb-{index}", mib * MIB)
            self.pieces.append((flushed(header), 1))
            crc, length = zlib.crc32(header, crc), length + len(header)
            self.pieces.append((chunk, mib))
            crc = crc32_combine(crc, crc32_zeros(mib, one_mib_crc), mib * MIB)
            length += mib * MIB
            left -= mib
            index += 1
        end = bytes(1024)  # the tar's end-of-archive blocks
        self.pieces.append((deflate.compress(end) + deflate.flush(zlib.Z_FINISH), 1))
        crc, length = zlib.crc32(end, crc), length + len(end)
        self.pieces.append(((crc & 0xFFFFFFFF).to_bytes(4, "little") + (length & 0xFFFFFFFF).to_bytes(4, "little"), 1))
        self.uncompressed = length
        digest = hashlib.sha256()
        self.size = 0
        for data, repeat in self.pieces:
            for _ in range(repeat):
                digest.update(data)
            self.size += len(data) * repeat
        self.digest = "sha256:" + digest.hexdigest()

    @staticmethod
    def _tar_header(name, size):
        info = tarfile.TarInfo(name)
        info.size = size
        info.mode = 0o644
        info.mtime = 0
        return info.tobuf(format=tarfile.USTAR_FORMAT)

    def chunks(self):
        for data, repeat in self.pieces:
            for _ in range(repeat):
                yield data


# ---- the server ----------------------------------------------------------------------------------------
class Blob:
    def __init__(self, data=None, bomb=None):
        self.data = data
        self.bomb = bomb
        self.size = bomb.size if bomb else len(data)

    def chunks(self, start=0, end=None):
        """The bytes [start, end) in pieces."""
        end = self.size if end is None else end
        if self.bomb is None:
            for i in range(start, end, 256 * 1024):
                yield self.data[i:min(i + 256 * 1024, end)]
            return
        pos = 0
        for piece in self.bomb.chunks():
            lo, hi = max(start, pos), min(end, pos + len(piece))
            if lo < hi:
                yield piece[lo - pos:hi - pos]
            pos += len(piece)
            if pos >= end:
                return


class State:
    def __init__(self, args):
        self.args = args
        self.lock = threading.Lock()
        self.counters = {}
        self.stop = threading.Event()
        self.token_serial = 0
        self.upload_serial = 0
        self.uploads = {}  # upload-offhost: bytes received per upload path
        self.port = self.port2 = None

        hello = b"hello from tests/cli/hostile_registry.py\n"
        layer_tar = tar_bytes([("hello.txt", hello), ("data.bin", pseudo_random(256 * 1024, b"lockstep"))])
        self.layer = gzip.compress(layer_tar, compresslevel=6, mtime=0)
        self.config = make_config([sha256(layer_tar)])
        layer_ref = (sha256(self.layer), len(self.layer))
        self.manifest = canonical(make_manifest(self.config, [layer_ref]))
        self.manifest_digest = sha256(self.manifest)
        flipped = bytearray(self.layer)
        flipped[len(flipped) // 2] ^= 0xFF
        self.flipped_layer = bytes(flipped)

        self.bomb = Bomb(args.bomb_bytes)
        self.bomb_config = make_config([EMPTY_SHA256])
        self.bomb_manifest = canonical(make_manifest(self.bomb_config, [(self.bomb.digest, self.bomb.size)]))

        self.blobs = {
            sha256(self.config): Blob(self.config),
            sha256(self.layer): Blob(self.layer),
            sha256(self.bomb_config): Blob(self.bomb_config),
            self.bomb.digest: Blob(bomb=self.bomb),
        }
        self.layer_digest = sha256(self.layer)

        valid = json.loads(self.manifest)
        big = canonical(dict(valid, annotations={"org.lockstep.padding": "x" * args.big_manifest_bytes}))
        # The valid layer listed many times, with as many diff_ids (many-layers, repeated-layer).
        self.repeated = {}
        for case, n in (("many-layers", 20000), ("repeated-layer", 500)):
            config = make_config([sha256(layer_tar)] * n)
            self.blobs[sha256(config)] = Blob(config)
            self.repeated[case] = canonical(make_manifest(config, [layer_ref] * n))
        self.manifests = {}  # case -> (body, media type, claimed digest)
        for case in CASES:
            body = self.manifest
            if case == "digest-mismatch":
                body = canonical(dict(valid, annotations={"org.lockstep.test": "tampered"}))
            elif case in ("manifest-too-big", "manifest-too-big-nolength"):
                body = big
            elif case == "gzip-bomb":
                body = self.bomb_manifest
            elif case in self.repeated:
                body = self.repeated[case]
            elif case.startswith("bad-digest"):
                broken = json.loads(self.manifest)
                if case == "bad-digest":
                    broken["layers"][0]["digest"] = "sha256:xyz"
                elif case == "bad-digest-md5":
                    broken["layers"][0]["digest"] = "md5:d41d8cd98f00b204e9800998ecf8427e"
                elif case == "bad-digest-traversal":
                    broken["layers"][0]["digest"] = "sha256:../../../../../../../../tmp/lockstep-hostile-traversal"
                else:
                    broken["config"]["digest"] = broken["config"]["digest"][:-1]
                body = canonical(broken)
            if case == "schema1":
                body = json.dumps({
                    "schemaVersion": 1, "name": "schema1", "tag": "latest", "architecture": host_arch(),
                    "fsLayers": [{"blobSum": self.layer_digest}],
                    "history": [{"v1Compatibility": json.dumps({"id": "0" * 64, "os": "linux"})}],
                    "signatures": [{"header": {"alg": "ES256"}, "signature": "bm90IGEgc2lnbmF0dXJl",
                                    "protected": "e30"}],
                }, indent=3).encode()
                self.manifests[case] = (body, SCHEMA1, sha256(body))
            else:
                claimed = self.manifest_digest if case == "digest-mismatch" else sha256(body)
                self.manifests[case] = (body, OCI_MANIFEST, claimed)

    def count(self, key):
        with self.lock:
            self.counters[key] = self.counters.get(key, 0) + 1
            return self.counters[key]

    def info(self):
        return {
            "port": self.port, "port2": self.port2, "cases": CASES, "mode": self.args.mode,
            "manifest_digest": self.manifest_digest, "manifest_size": len(self.manifest),
            "config_digest": sha256(self.config), "layer_digest": self.layer_digest,
            "layer_size": len(self.layer), "bomb_manifest_digest": sha256(self.bomb_manifest),
            "bomb_layer_digest": self.bomb.digest, "bomb_layer_size": self.bomb.size,
            "bomb_uncompressed_bytes": self.bomb.uncompressed,
            "big_manifest_bytes": len(self.manifests["manifest-too-big"][0]),
        }


LOG_LOCK = threading.Lock()
ROUTE = re.compile(r"^/v2/(?P<name>[^?]+?)/(?P<kind>manifests|blobs)/(?P<ref>[^/?]+)$")


def make_handler(state, listener):
    args = state.args

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "lockstep-hostile-registry"

        def log_message(self, format, *a):
            pass

        def log_request(self, code="-", size="-"):
            pass

        def note(self, status, size="-", case="-", attempt=1):
            stamp = datetime.datetime.now(datetime.timezone.utc).strftime("%d/%b/%Y:%H:%M:%S +0000")
            auth = "present" if self.headers.get("Authorization") else "absent"
            line = (f'{self.client_address[0]} - - [{stamp}] "{self.command} {self.path} {self.request_version}" '
                    f'{status} {size} listener={listener} case={case} auth={auth} '
                    f'range={self.headers.get("Range") or "-"} attempt={attempt}\n')
            with LOG_LOCK:
                sys.stdout.write(line)
                sys.stdout.flush()

        def start(self, status, length, headers=(), case="-", attempt=1, content_type=None):
            """Logs the request and sends the status line and headers (length None: no Content-Length)."""
            self.note(status, "-" if length is None else length, case, attempt)
            self.send_response(status)
            self.send_header("Docker-Distribution-API-Version", "registry/2.0")
            if content_type:
                self.send_header("Content-Type", content_type)
            if length is not None:
                self.send_header("Content-Length", str(length))
            for k, v in headers:
                self.send_header(k, v)
            self.end_headers()

        def send_body(self, data):
            if self.command != "HEAD":
                self.wfile.write(data)

        def answer(self, status, body=b"", headers=(), case="-", attempt=1, content_type="application/json"):
            self.start(status, len(body), headers, case, attempt, content_type)
            self.send_body(body)

        def error(self, status, code, message, headers=(), case="-", attempt=1):
            body = json.dumps({"errors": [{"code": code, "message": message}]}).encode()
            self.answer(status, body, headers, case, attempt)

        def drop(self):
            """Closes the connection now, without finishing the response."""
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

        def stall(self):
            """Sends nothing more for --stall-seconds, then closes."""
            self.close_connection = True
            try:
                self.wfile.flush()
            except OSError:
                return
            state.stop.wait(args.stall_seconds)

        # ---- listener 2: blobs redirected off the registry's host ----
        def second_upload(self):
            """upload-offhost's upload session on listener 2: PATCH appends, PUT ends it."""
            length = int(self.headers.get("Content-Length") or 0)
            if length < 0 or length > 64 * MIB:
                return self.error(400, "SIZE_INVALID", "body too large", case="upload-offhost")
            body = self.rfile.read(length) if length else b""
            path = self.path.split("?", 1)[0]
            with state.lock:
                received = state.uploads.get(path, 0) + len(body)
                state.uploads[path] = received
            if self.command == "PATCH":
                return self.start(202, 0, [("Location", self.path), ("Range", f"0-{max(received, 1) - 1}")],
                                  case="upload-offhost")
            digest = re.search(r"[?&]digest=(sha256(?::|%3A)[0-9a-f]{64})", self.path)
            if not digest:
                return self.error(400, "DIGEST_INVALID", "no digest", case="upload-offhost")
            self.start(201, 0, [("Docker-Content-Digest", digest.group(1).replace("%3A", ":"))],
                       case="upload-offhost")

        def second_listener(self):
            if self.path.startswith("/upload/"):
                return self.second_upload()
            if self.path.startswith("/token"):
                body = json.dumps({"token": "offhost", "expires_in": 300}).encode()
                return self.answer(200, body, case="realm-offhost")
            match = re.match(r"^/blobs/(sha256:[0-9a-f]{64})(\?.*)?$", self.path)
            if self.headers.get("Authorization"):
                return self.error(400, "InvalidArgument", "only one auth mechanism allowed (Authorization sent "
                                  "to the redirect target)", case="redirect-offhost")
            blob = state.blobs.get(match.group(1)) if match else None
            if blob is None:
                return self.error(404, "BLOB_UNKNOWN", "blob unknown", case="redirect-offhost")
            self.start(200, blob.size, case="redirect-offhost", content_type="application/octet-stream")
            if self.command != "HEAD":
                for piece in blob.chunks():
                    self.wfile.write(piece)

        # ---- listener 1 ----
        def case_of(self, name):
            if args.mode:
                return args.mode
            first = name.split("/", 1)[0]
            return first if first in CASES else None

        def ping(self):
            mode = args.mode
            if mode in PING_CASES:
                attempt = state.count(("ping",)) if self.command == "GET" else 1
                if mode == "auth-loop":
                    return self.auth_loop_challenge("ping", mode)
                if mode == "rate-limit" and attempt <= 2:
                    return self.error(429, "TOOMANYREQUESTS", "slow down", [("Retry-After", "1")], mode, attempt)
                if mode == "flaky-5xx" and attempt == 1:
                    return self.error(500, "UNKNOWN", "flaky", case=mode, attempt=attempt)
                if mode == "stall-headers":
                    self.note("000", case=mode)
                    return self.stall()
                if mode == "stall":
                    self.start(200, 2, case=mode, content_type="application/json")
                    return self.stall()
            self.answer(200, b"{}", case=mode or "-")

        def auth_loop_challenge(self, name, case):
            realm = f"http://{args.addr}:{state.port}/token?svc=hostile"
            challenge = f'Bearer realm="{realm}",service="hostile",scope="repository:{name}:pull"'
            self.error(401, "UNAUTHORIZED", "authentication required", [("WWW-Authenticate", challenge)], case)

        def do_GET(self):
            if listener == 2:
                return self.second_listener()
            path = self.path.split("?", 1)[0]
            if path == "/v2/" or path == "/v2":
                return self.ping()
            if path == "/token":
                with state.lock:
                    state.token_serial += 1
                    token = f"never-works-{state.token_serial}"
                body = json.dumps({"token": token, "access_token": token, "expires_in": 300}).encode()
                return self.answer(200, body, case="auth-loop")
            if path == "/_hostile/info":
                return self.answer(200, json.dumps(state.info()).encode())
            match = ROUTE.match(path)
            if not match:
                return self.error(404, "NOT_FOUND", "no such endpoint")
            name, kind, ref = match.group("name", "kind", "ref")
            case = self.case_of(name)
            if case is None:
                return self.error(404, "NAME_UNKNOWN", f"repository name not known to registry: {name}")
            if case == "auth-loop":
                return self.auth_loop_challenge(name, case)
            if case == "realm-offhost":
                realm = f"http://{args.addr}:{state.port2}/token"
                return self.error(401, "UNAUTHORIZED", "authentication required",
                                  [("WWW-Authenticate", f'Bearer realm="{realm}",service="hostile"')], case)
            if case == "upload-offhost":
                if not self.headers.get("Authorization"):
                    return self.basic_challenge(case)
                return self.error(404, "BLOB_UNKNOWN" if kind == "blobs" else "MANIFEST_UNKNOWN", "unknown",
                                  case=case)
            if case == "redirect-offhost" and not self.headers.get("Authorization"):
                return self.error(401, "UNAUTHORIZED", "authentication required",
                                  [("WWW-Authenticate", 'Basic realm="hostile"')], case)
            if kind == "manifests":
                return self.manifest(name, case, ref)
            return self.blob(name, case, ref, self.path)

        do_HEAD = do_GET

        def basic_challenge(self, case):
            self.error(401, "UNAUTHORIZED", "authentication required",
                       [("WWW-Authenticate", 'Basic realm="hostile"')], case)

        def do_POST(self):
            if listener == 1 and self.path == "/_hostile/reset":
                with state.lock:
                    state.counters.clear()
                return self.answer(200, b"{}")
            upload = re.match(r"^/v2/(?P<name>[^?]+?)/blobs/uploads/(\?.*)?$", self.path)
            if listener == 1 and upload and self.case_of(upload.group("name")) == "upload-offhost":
                if not self.headers.get("Authorization"):
                    return self.basic_challenge("upload-offhost")
                with state.lock:
                    state.upload_serial += 1
                    where = f"http://{args.addr}:{state.port2}/upload/{state.upload_serial}"
                return self.start(202, 0, [("Location", where), ("Docker-Upload-UUID", str(state.upload_serial))],
                                  case="upload-offhost")
            self.refuse()

        def do_PUT(self):
            if listener == 2 and self.path.startswith("/upload/"):
                return self.second_upload()
            match = ROUTE.match(self.path.split("?", 1)[0])
            if listener == 1 and match and match.group("kind") == "manifests" and \
                    self.case_of(match.group("name")) == "upload-offhost":
                if not self.headers.get("Authorization"):
                    return self.basic_challenge("upload-offhost")
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if 0 < length <= 4 * MIB else b""
                digest = "sha256:" + hashlib.sha256(body).hexdigest()
                return self.start(201, 0, [("Docker-Content-Digest", digest)], case="upload-offhost")
            self.refuse()

        def do_PATCH(self):
            if listener == 2 and self.path.startswith("/upload/"):
                return self.second_upload()
            self.refuse()

        def refuse(self):
            length = int(self.headers.get("Content-Length") or 0)
            if 0 < length <= 64 * MIB:
                self.rfile.read(length)
            self.error(405, "UNSUPPORTED", "this registry is read-only")

        do_DELETE = refuse

        def manifest(self, name, case, ref):
            body, media_type, claimed = state.manifests[case]
            if ref.startswith("sha256:") and ref != claimed:
                return self.error(404, "MANIFEST_UNKNOWN", f"manifest unknown: {ref}", case=case)
            headers = [("Docker-Content-Digest", claimed)]
            attempt = state.count((name, "manifest", ref)) if self.command == "GET" else 1
            get = self.command == "GET"
            if case == "rate-limit" and get and attempt <= 2:
                return self.error(429, "TOOMANYREQUESTS", "slow down", [("Retry-After", "1")], case, attempt)
            if case == "flaky-5xx" and get and attempt == 1:
                return self.error(500, "UNKNOWN", "flaky", case=case, attempt=attempt)
            if case == "stall-headers" and get:
                self.note("000", case=case, attempt=attempt)
                return self.stall()
            if case == "manifest-too-big-nolength":
                self.close_connection = True
                self.start(200, None, headers + [("Connection", "close")], case, attempt, media_type)
                return self.send_body(body)
            if case == "stall-manifest" and get:
                self.start(200, len(body), headers, case, attempt, media_type)
                self.wfile.write(body[:10])
                return self.stall()
            self.answer(200, body, headers, case, attempt, media_type)

        def blob(self, name, case, digest, raw_path):
            blob = state.blobs.get(digest)
            if blob is None:
                return self.error(404, "BLOB_UNKNOWN", f"blob unknown: {digest}", case=case)
            get = self.command == "GET"
            attempt = state.count((name, "blob", digest)) if get else 1
            headers = [("Docker-Content-Digest", digest), ("Accept-Ranges", "bytes")]
            octets = "application/octet-stream"
            if case == "redirect-loop":
                target = f"/v2/{name}/blobs/{digest}" + ("" if "loop=1" in raw_path else "?loop=1")
                return self.answer(307, b"", [("Location", target)], case, attempt, None)
            if case == "redirect-offhost":
                target = f"http://{args.addr}:{state.port2}/blobs/{digest}?X-Amz-Signature=fake"
                return self.answer(307, b"", [("Location", target)], case, attempt, None)
            if case == "flaky-5xx" and get and attempt == 1:
                return self.error(503, "UNAVAILABLE", "flaky", case=case, attempt=attempt)
            if case == "blob-mismatch" and digest == state.layer_digest:
                return self.answer(200, state.flipped_layer, headers, case, attempt, octets)
            if case == "length-long" and get:
                self.start(200, blob.size + 1000, headers, case, attempt, octets)
                for piece in blob.chunks():
                    self.wfile.write(piece)
                return self.drop()
            if case == "length-short" and get:
                self.start(200, max(blob.size // 2, blob.size - 100), headers + [("Connection", "close")],
                           case, attempt, octets)
                for piece in blob.chunks():
                    self.wfile.write(piece)
                return self.drop()
            if case == "stall" and get:
                self.start(200, blob.size, headers, case, attempt, octets)
                self.wfile.write(next(blob.chunks(0, min(10, blob.size))))
                return self.stall()
            if case == "resume" and get and digest == state.layer_digest and attempt == 1:
                self.start(200, blob.size, headers, case, attempt, octets)
                self.wfile.write(next(blob.chunks(0, blob.size // 2)))
                return self.drop()
            wanted = self.headers.get("Range")
            if get and wanted:
                m = re.fullmatch(r"bytes=(\d+)-(\d*)", wanted.strip())
                first = int(m.group(1)) if m else blob.size
                last = int(m.group(2)) if m and m.group(2) else blob.size - 1
                if first >= blob.size or last < first:
                    return self.error(416, "RANGE_INVALID", f"range {wanted} not satisfiable",
                                      [("Content-Range", f"bytes */{blob.size}")], case, attempt)
                last = min(last, blob.size - 1)
                self.start(206, last - first + 1, headers + [("Content-Range", f"bytes {first}-{last}/{blob.size}")],
                           case, attempt, octets)
                for piece in blob.chunks(first, last + 1):
                    self.wfile.write(piece)
                return
            self.start(200, blob.size, headers, case, attempt, octets)
            if get:
                for piece in blob.chunks():
                    self.wfile.write(piece)

        def handle_one_request(self):
            try:
                super().handle_one_request()
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True

    return Handler


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False

    def handle_error(self, request, client_address):
        # A client that hangs up mid-answer is the normal case here; anything else goes to stderr.
        exc = sys.exc_info()[1]
        if not isinstance(exc, (BrokenPipeError, ConnectionResetError, TimeoutError)):
            super().handle_error(request, client_address)


def main():
    p = argparse.ArgumentParser(description="A misbehaving OCI registry (test use); cases in the source")
    p.add_argument("--info", help="write ports and digests here (JSON) once listening")
    p.add_argument("--addr", default="127.0.0.1", help="the IPv4 address to listen on")
    p.add_argument("--mode", choices=CASES, help="every repository behaves as this case")
    p.add_argument("--bomb-bytes", type=int, default=16 << 30, help="gzip-bomb: uncompressed member bytes")
    p.add_argument("--big-manifest-bytes", type=int, default=6 * MIB, help="manifest-too-big: padding")
    p.add_argument("--stall-seconds", type=float, default=600, help="how long a stall lasts")
    p.add_argument("--tls-cert", help="serve the first listener over HTTPS with this PEM certificate")
    p.add_argument("--tls-key", help="and this PEM key (the second listener stays plain HTTP)")
    args = p.parse_args()

    state = State(args)
    server = Server((args.addr, 0), make_handler(state, 1))
    if args.tls_cert:
        import ssl
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    server2 = Server((args.addr, 0), make_handler(state, 2))
    state.port, state.port2 = server.server_address[1], server2.server_address[1]
    threading.Thread(target=server2.serve_forever, daemon=True).start()
    if args.info:
        tmp = args.info + ".tmp"
        with open(tmp, "w") as f:
            json.dump(state.info(), f, indent=1)
            f.write("\n")
        os.rename(tmp, args.info)
    else:
        print(json.dumps(state.info()), flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        state.stop.set()


if __name__ == "__main__":
    sys.exit(main())
