#!/usr/bin/python3
"""A token issuer for docker-registry's `auth: token` mode (the distribution token specification).

Started by tests/cli/registry.sh (`registry_up NAME token`); usable alone. Python 3 standard library
plus python3-cryptography (Debian 12 ships both).

  GET  /PATH?QUERY&service=S&scope=SCOPE[&scope=SCOPE...][&offline_token=true][&account=U]
       The realm is http(s)://ADDR:PORT/PATH?QUERY: it already carries a query (like nvcr.io's
       `https://nvcr.io/proxy_auth?...`), so a client must append its parameters with '&'. A request
       whose realm query is not there verbatim (each of its parameters exactly once, with its value)
       is refused with 400 and logged as `"realm_query_ok": false`: `?foo=bar?service=x` is.
       Scopes: any number of `scope` parameters, each one or more space-separated
       `TYPE:NAME:ACTIONS` (ACTIONS comma-separated); scopes naming the same resource are merged.
       Credentials: HTTP Basic, checked against --user/--password. Wrong credentials: 401. None:
       --anonymous decides: `deny` 401, `empty` a token that grants nothing (as Docker Hub does for
       what you may not read), `pull` a token that grants only the `pull` actions asked for.
       An authenticated user gets every action asked for, on every repository.
  POST /PATH?QUERY   (application/x-www-form-urlencoded, the OAuth2 form)
       grant_type=password: username, password, service, scope (space-separated), client_id,
       access_type=offline for a refresh token. grant_type=refresh_token: refresh_token, service,
       scope. Answers with a refresh_token when one was asked for (offline) or used.
  Answer: {"token": JWT, "access_token": JWT, "expires_in": N, "issued_at": RFC3339[, "refresh_token"]}
       The JWT is signed with --key (EC P-256: ES256; RSA: RS256) and names its certificate --cert in
       an `x5c` header; the registry trusts it through `rootcertbundle` = --cert. Claims: iss
       (--issuer), sub, aud (the service asked for), exp, nbf, iat, jti, access. Note that
       docker-registry 2.8.2 accepts a token up to 60 s past its `exp` (its leeway): a short
       --expires-in shows in what the client does (a new token fetch), not in a registry refusal.
  Log (--log): one JSON object per line and request, never a password, token or refresh token:
       {"method", "path", "realm_query_ok", "grant_type", "service", "scopes" (merged, sorted,
        "TYPE:NAME:ACTIONS"), "granted" (likewise), "user" (null when anonymous), "auth"
        ("basic", "refresh_token", "password", "none" or "bad"), "status"}

Options: --addr IP (127.0.0.1), --port-file F (binds port 0 and writes the port to F, or --port N),
--key, --cert, --issuer, --realm-path (/auth), --realm-query (foo=bar), --service (the only service
accepted; any when empty), --user, --password, --anonymous deny|empty|pull, --expires-in N (seconds), --log F,
--tls-cert/--tls-key (serve HTTPS), --parent PID (exit when PID is gone).
"""

import argparse
import base64
import datetime
import http.server
import json
import os
import secrets
import ssl
import sys
import threading
import time
import urllib.parse

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Signer:
    """Signs JWTs with a private key, naming its certificate in x5c."""

    def __init__(self, key_path, cert_path):
        with open(key_path, "rb") as f:
            self.key = serialization.load_pem_private_key(f.read(), password=None)
        with open(cert_path, "rb") as f:
            cert = x509.load_pem_x509_certificate(f.read())
        self.x5c = [base64.b64encode(cert.public_bytes(serialization.Encoding.DER)).decode()]
        if isinstance(self.key, ec.EllipticCurvePrivateKey):
            if self.key.curve.name != "secp256r1":
                raise SystemExit("token_issuer: an EC key must be P-256 (ES256)")
            self.alg = "ES256"
        elif isinstance(self.key, rsa.RSAPrivateKey):
            self.alg = "RS256"
        else:
            raise SystemExit("token_issuer: the key must be EC P-256 or RSA")

    def sign(self, claims):
        header = {"typ": "JWT", "alg": self.alg, "x5c": self.x5c}
        signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "." +
                         b64url(json.dumps(claims, separators=(",", ":")).encode())).encode()
        if self.alg == "ES256":
            r, s = decode_dss_signature(self.key.sign(signing_input, ec.ECDSA(hashes.SHA256())))
            signature = r.to_bytes(32, "big") + s.to_bytes(32, "big")
        else:
            signature = self.key.sign(signing_input, padding.PKCS1v15(), hashes.SHA256())
        return signing_input.decode() + "." + b64url(signature)


def parse_scopes(values):
    """Merged scopes: {(type, name): set(actions)}; None when one is malformed."""
    merged = {}
    for value in values:
        for scope in value.split():
            kind, sep, rest = scope.partition(":")
            name, sep2, actions = rest.rpartition(":")
            if not sep or not sep2 or not kind or not name:
                return None
            merged.setdefault((kind, name), set()).update(a for a in actions.split(",") if a)
    return merged


def scope_strings(merged):
    return sorted(f"{k}:{n}:{','.join(sorted(a))}" for (k, n), a in merged.items())


class Issuer:
    def __init__(self, args):
        self.args = args
        self.signer = Signer(args.key, args.cert)
        self.refresh_tokens = {}  # refresh token -> user
        self.lock = threading.Lock()
        self.log_lock = threading.Lock()
        self.realm_query = urllib.parse.parse_qs(args.realm_query, keep_blank_values=True)

    def log(self, entry):
        if not self.args.log:
            return
        with self.log_lock, open(self.args.log, "a") as f:
            f.write(json.dumps(entry, sort_keys=True) + "\n")

    def realm_query_ok(self, query):
        return all(query.get(k) == v for k, v in self.realm_query.items())

    def grant(self, merged, user):
        """What the token grants: everything asked for to a user, pull (or nothing) to anonymous."""
        granted = {}
        for (kind, name), actions in merged.items():
            if user is not None:
                allowed = set(actions)
            elif self.args.anonymous == "pull":
                allowed = actions & {"pull"}
            else:
                allowed = set()
            if allowed:
                granted[(kind, name)] = allowed
        return granted

    def token_answer(self, service, granted, user, offline):
        now = int(time.time())
        claims = {
            "iss": self.args.issuer,
            "sub": user or "",
            "aud": service,
            "exp": now + self.args.expires_in,
            "nbf": now - 1,
            "iat": now,
            "jti": secrets.token_hex(16),
            "access": [{"type": k, "name": n, "actions": sorted(a)} for (k, n), a in sorted(granted.items())],
        }
        token = self.signer.sign(claims)
        answer = {
            "token": token,
            "access_token": token,
            "expires_in": self.args.expires_in,
            "issued_at": datetime.datetime.fromtimestamp(now, datetime.timezone.utc).isoformat().replace(
                "+00:00", "Z"),
        }
        if offline and user is not None:
            refresh = secrets.token_urlsafe(24)
            with self.lock:
                self.refresh_tokens[refresh] = user
            answer["refresh_token"] = refresh
        return answer


def make_handler(issuer):
    args = issuer.args

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        server_version = "lockstep-test-token-issuer"

        def log_message(self, format, *a):
            pass

        def reply(self, status, body, extra_headers=()):
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for k, v in extra_headers:
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)

        def basic_credentials(self):
            """("none"|"basic"|"bad", user, password) from the Authorization header."""
            header = self.headers.get("Authorization")
            if header is None:
                return "none", None, None
            scheme, _, value = header.partition(" ")
            if scheme.lower() != "basic":
                return "bad", None, None
            try:
                user, sep, password = base64.b64decode(value.strip(), validate=True).decode().partition(":")
            except (ValueError, UnicodeDecodeError):
                return "bad", None, None
            return ("basic", user, password) if sep else ("bad", None, None)

        def check_user(self, user, password):
            return (args.user and secrets.compare_digest(user.encode(), args.user.encode()) and
                    secrets.compare_digest(password.encode(), args.password.encode()))

        def handle_request(self, method, form):
            url = urllib.parse.urlsplit(self.path)
            query = urllib.parse.parse_qs(url.query, keep_blank_values=True)
            entry = {"method": method, "path": url.path, "realm_query_ok": issuer.realm_query_ok(query),
                     "grant_type": None, "service": None, "scopes": [], "granted": [], "user": None,
                     "auth": "none", "status": None}

            def finish(status, body, headers=()):
                entry["status"] = status
                issuer.log(entry)
                self.reply(status, body, headers)

            if url.path != args.realm_path:
                return finish(404, {"errors": [{"code": "NOT_FOUND", "message": "not the realm"}]})
            if not entry["realm_query_ok"]:
                return finish(400, {"errors": [{
                    "code": "BAD_REQUEST",
                    "message": f"the realm's query '{args.realm_query}' is missing or mangled"}]})
            params = form if method == "POST" else query

            def one(name):
                values = params.get(name, [])
                return values[0] if values else None

            service = one("service")
            entry["service"] = service
            if args.service and service != args.service:
                return finish(400, {"errors": [{"code": "BAD_REQUEST",
                                                "message": f"unknown service '{service}'"}]})
            merged = parse_scopes(params.get("scope", []))
            if merged is None:
                return finish(400, {"errors": [{"code": "BAD_REQUEST", "message": "malformed scope"}]})
            entry["scopes"] = scope_strings(merged)
            challenge = [("WWW-Authenticate", 'Basic realm="lockstep-test-token-issuer"')]
            unauthorized = {"errors": [{"code": "UNAUTHORIZED", "message": "authentication required"}]}

            user = None
            offline = False
            if method == "POST":
                grant_type = one("grant_type")
                entry["grant_type"] = grant_type
                if grant_type == "password":
                    entry["auth"] = "password"
                    if not self.check_user(one("username") or "", one("password") or ""):
                        entry["auth"] = "bad"
                        return finish(401, unauthorized)
                    user = one("username")
                    offline = one("access_type") == "offline"
                elif grant_type == "refresh_token":
                    entry["auth"] = "refresh_token"
                    with issuer.lock:
                        user = issuer.refresh_tokens.get(one("refresh_token") or "")
                    if user is None:
                        entry["auth"] = "bad"
                        return finish(401, unauthorized)
                    offline = True
                else:
                    return finish(400, {"errors": [{"code": "UNSUPPORTED_GRANT_TYPE",
                                                    "message": f"grant_type '{grant_type}'"}]})
            else:
                kind, name, password = self.basic_credentials()
                entry["auth"] = kind
                if kind == "bad":
                    return finish(401, unauthorized, challenge)
                if kind == "basic":
                    if not self.check_user(name, password):
                        entry["auth"] = "bad"
                        return finish(401, unauthorized, challenge)
                    user = name
                elif args.anonymous == "deny":
                    return finish(401, unauthorized, challenge)
                offline = one("offline_token") == "true"
            entry["user"] = user
            granted = issuer.grant(merged, user)
            entry["granted"] = scope_strings(granted)
            return finish(200, issuer.token_answer(service, granted, user, offline))

        def do_GET(self):
            self.handle_request("GET", {})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length).decode("utf-8", "replace") if length > 0 else ""
            self.handle_request("POST", urllib.parse.parse_qs(body, keep_blank_values=True))

    return Handler


def watch_parent(pid):
    while True:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            os._exit(0)
        except PermissionError:
            pass
        time.sleep(0.5)


def main():
    p = argparse.ArgumentParser(description="A token issuer for docker-registry's token auth (test use)")
    p.add_argument("--addr", default="127.0.0.1")
    p.add_argument("--port", type=int, default=0)
    p.add_argument("--port-file")
    p.add_argument("--key", required=True)
    p.add_argument("--cert", required=True)
    p.add_argument("--issuer", default="lockstep-test-issuer")
    p.add_argument("--service", default="")
    p.add_argument("--realm-path", default="/auth")
    p.add_argument("--realm-query", default="foo=bar")
    p.add_argument("--user", default="")
    p.add_argument("--password", default="")
    p.add_argument("--anonymous", choices=["deny", "empty", "pull"], default="empty")
    p.add_argument("--expires-in", type=int, default=300)
    p.add_argument("--log")
    p.add_argument("--tls-cert")
    p.add_argument("--tls-key")
    p.add_argument("--parent", type=int)
    args = p.parse_args()
    if not args.realm_query or not urllib.parse.parse_qs(args.realm_query):
        p.error("--realm-query must carry at least one parameter (NAME=VALUE)")

    issuer = Issuer(args)
    server = http.server.ThreadingHTTPServer((args.addr, args.port), make_handler(issuer))
    server.daemon_threads = True
    if args.tls_cert:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args.tls_cert, args.tls_key)
        server.socket = context.wrap_socket(server.socket, server_side=True)
    port = server.server_address[1]
    if args.port_file:
        tmp = args.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(f"{port}\n")
        os.rename(tmp, args.port_file)
    else:
        print(port, flush=True)
    if args.parent:
        threading.Thread(target=watch_parent, args=(args.parent,), daemon=True).start()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    sys.exit(main())
