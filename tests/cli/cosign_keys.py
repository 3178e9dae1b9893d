#!/usr/bin/env python3
"""Test helpers for tests/cli/test_signing.sh, written apart from lockstep's own code.

    cosign_keys.py keypair PREFIX PASSPHRASE
        PREFIX.key in cosign's encrypted format (PEM "ENCRYPTED SIGSTORE PRIVATE KEY": JSON with
        scrypt N=32768 r=8 p=1 over a 32-byte salt, NaCl secretbox with a 24-byte nonce, sealing the
        PKCS #8 DER of a P-256 key; python3-cryptography and python3-nacl) and PREFIX.pub (PEM).
    cosign_keys.py sign REGISTRY REPO REFERENCE DIGEST KEY PASSPHRASE
        Signs DIGEST as cosign and skopeo do: the simple-signing payload naming DIGEST and REFERENCE,
        ECDSA P-256/SHA-256 with the (cosign-encrypted) KEY, stored under sha256-<hex>.sig.
    cosign_keys.py verify REGISTRY REPO DIGEST PUBKEY
        Exit 0 when a signature under sha256-<hex>.sig verifies with PUBKEY and its payload passes the
        checks containers/image makes (exactly critical and optional; critical exactly identity, image
        and type; the type; the digest); prints the signed reference.
    cosign_keys.py verify-dsse REGISTRY REPO DIGEST PUBKEY
        Finds the DSSE envelope attached to DIGEST (the referrers index under the tag sha256-<hex>,
        artifactType application/vnd.dsse.envelope.v1+json), verifies its signature over DSSE's
        pre-authentication encoding with PUBKEY, and prints the statement's subject digest and
        predicate type.
    cosign_keys.py push-signature REGISTRY REPO TAG PAYLOAD_FILE SIGNATURE_ANNOTATION
        A signature manifest as cosign lays it out (an OCI manifest whose layer is the payload with
        media type application/vnd.dev.cosign.simplesigning.v1+json and the annotation
        dev.cosignproject.cosign/signature), pushed over plain HTTP with the distribution API.
"""
import base64
import hashlib
import json
import os
import sys
import urllib.request

import nacl.secret
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec


def keypair(prefix, passphrase):
    key = ec.generate_private_key(ec.SECP256R1())
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption())
    salt = os.urandom(32)
    nonce = os.urandom(24)
    box_key = hashlib.scrypt(passphrase.encode(), salt=salt, n=32768, r=8, p=1, maxmem=64 << 20, dklen=32)
    sealed = nacl.secret.SecretBox(box_key).encrypt(der, nonce).ciphertext  # MAC || ciphertext
    body = json.dumps({
        "kdf": {"name": "scrypt", "params": {"N": 32768, "r": 8, "p": 1},
                "salt": base64.b64encode(salt).decode()},
        "cipher": {"name": "nacl/secretbox", "nonce": base64.b64encode(nonce).decode()},
        "ciphertext": base64.b64encode(sealed).decode(),
    }).encode()
    b64 = base64.b64encode(body).decode()
    pem = "-----BEGIN ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
    pem += "".join(b64[i:i + 64] + "\n" for i in range(0, len(b64), 64))
    pem += "-----END ENCRYPTED SIGSTORE PRIVATE KEY-----\n"
    with open(prefix + ".key", "w") as f:
        f.write(pem)
    with open(prefix + ".pub", "wb") as f:
        f.write(key.public_key().public_bytes(serialization.Encoding.PEM,
                                              serialization.PublicFormat.SubjectPublicKeyInfo))


def put_blob(registry, repo, data):
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    req = urllib.request.Request(f"http://{registry}/v2/{repo}/blobs/uploads/", method="POST", data=b"")
    with urllib.request.urlopen(req) as r:
        location = r.headers["Location"]
    if location.startswith("/"):
        location = f"http://{registry}{location}"
    sep = "&" if "?" in location else "?"
    req = urllib.request.Request(f"{location}{sep}digest={digest}", method="PUT", data=data,
                                 headers={"Content-Type": "application/octet-stream"})
    urllib.request.urlopen(req).close()
    return digest, len(data)


def push_signature(registry, repo, tag, payload_file, annotation):
    with open(payload_file, "rb") as f:
        payload = f.read()
    layer_digest, layer_size = put_blob(registry, repo, payload)
    config = json.dumps({"architecture": "", "os": "", "config": {},
                         "rootfs": {"type": "layers", "diff_ids": [layer_digest]}}).encode()
    config_digest, config_size = put_blob(registry, repo, config)
    manifest = json.dumps({
        "schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest,
                   "size": config_size},
        "layers": [{"mediaType": "application/vnd.dev.cosign.simplesigning.v1+json", "digest": layer_digest,
                    "size": layer_size, "annotations": {"dev.cosignproject.cosign/signature": annotation}}],
    }).encode()
    req = urllib.request.Request(f"http://{registry}/v2/{repo}/manifests/{tag}", method="PUT", data=manifest,
                                 headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json"})
    urllib.request.urlopen(req).close()


def load_key(path, passphrase):
    with open(path) as f:
        text = f.read()
    body = "".join(text.split("-----")[2].split())
    data = json.loads(base64.b64decode(body))
    kdf, params = data["kdf"], data["kdf"]["params"]
    assert kdf["name"] == "scrypt" and data["cipher"]["name"] == "nacl/secretbox"
    box_key = hashlib.scrypt(passphrase.encode(), salt=base64.b64decode(kdf["salt"]), n=params["N"], r=params["r"],
                             p=params["p"], maxmem=256 << 20, dklen=32)
    der = nacl.secret.SecretBox(box_key).decrypt(base64.b64decode(data["ciphertext"]),
                                                 base64.b64decode(data["cipher"]["nonce"]))
    return serialization.load_der_private_key(der, password=None)


def sign(registry, repo, reference, digest, key_path, passphrase):
    key = load_key(key_path, passphrase)
    payload = json.dumps({"critical": {"identity": {"docker-reference": reference},
                                       "image": {"docker-manifest-digest": digest},
                                       "type": "cosign container image signature"},
                          "optional": None}).encode()
    signature = key.sign(payload, ec.ECDSA(hashes.SHA256()))
    with open("payload.tmp", "wb") as f:
        f.write(payload)
    push_signature(registry, repo, "sha256-" + digest.split(":")[1] + ".sig", "payload.tmp",
                   base64.b64encode(signature).decode())


def get(url, accept=None):
    req = urllib.request.Request(url, headers={"Accept": accept} if accept else {})
    with urllib.request.urlopen(req) as r:
        return r.read()


def verify(registry, repo, digest, pub_path):
    with open(pub_path, "rb") as f:
        pub = serialization.load_pem_public_key(f.read())
    tag = "sha256-" + digest.split(":")[1] + ".sig"
    manifest = json.loads(get(f"http://{registry}/v2/{repo}/manifests/{tag}",
                              "application/vnd.oci.image.manifest.v1+json"))
    for layer in manifest["layers"]:
        if layer["mediaType"] != "application/vnd.dev.cosign.simplesigning.v1+json":
            continue
        payload = get(f"http://{registry}/v2/{repo}/blobs/{layer['digest']}")
        if "sha256:" + hashlib.sha256(payload).hexdigest() != layer["digest"]:
            continue
        try:
            pub.verify(base64.b64decode(layer["annotations"]["dev.cosignproject.cosign/signature"]), payload,
                       ec.ECDSA(hashes.SHA256()))
        except Exception:  # noqa: BLE001 - another key's signature
            continue
        p = json.loads(payload)
        c = p["critical"]
        if set(p) != {"critical", "optional"} or set(c) != {"identity", "image", "type"}:
            continue
        if c["type"] != "cosign container image signature" or set(c["image"]) != {"docker-manifest-digest"}:
            continue
        if c["image"]["docker-manifest-digest"] == digest and set(c["identity"]) == {"docker-reference"}:
            print(c["identity"]["docker-reference"])
            return 0
    return 1


def verify_dsse(registry, repo, digest, pub_path):
    with open(pub_path, "rb") as f:
        pub = serialization.load_pem_public_key(f.read())
    index = json.loads(get(f"http://{registry}/v2/{repo}/manifests/sha256-{digest.split(':')[1]}",
                           "application/vnd.oci.image.index.v1+json"))
    for d in index["manifests"]:
        if d.get("artifactType") != "application/vnd.dsse.envelope.v1+json":
            continue
        manifest = json.loads(get(f"http://{registry}/v2/{repo}/manifests/{d['digest']}",
                                  "application/vnd.oci.image.manifest.v1+json"))
        if manifest["subject"]["digest"] != digest:
            continue
        env = json.loads(get(f"http://{registry}/v2/{repo}/blobs/{manifest['layers'][0]['digest']}"))
        body = base64.b64decode(env["payload"])
        ptype = env["payloadType"].encode()
        pae = b"DSSEv1 %d %s %d %s" % (len(ptype), ptype, len(body), body)
        for s in env["signatures"]:
            try:
                pub.verify(base64.b64decode(s["sig"]), pae, ec.ECDSA(hashes.SHA256()))
            except Exception:  # noqa: BLE001 - another key
                continue
            statement = json.loads(body)
            print("sha256:" + statement["subject"][0]["digest"]["sha256"], statement["predicateType"])
            return 0
    return 1


if __name__ == "__main__":
    if sys.argv[1] == "keypair":
        keypair(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "sign":
        sign(*sys.argv[2:8])
    elif sys.argv[1] == "verify":
        sys.exit(verify(*sys.argv[2:6]))
    elif sys.argv[1] == "verify-dsse":
        sys.exit(verify_dsse(*sys.argv[2:6]))
    elif sys.argv[1] == "push-signature":
        push_signature(*sys.argv[2:7])
    else:
        sys.exit(f"cosign_keys.py: unknown command {sys.argv[1]!r}")
