"""An HTTP handler laid out like snapshot.debian.org, for tests/cli/test_snapshot.sh (loaded by
lib.sh's start_http_server DIR HANDLER.py).

Under DIR, snapshot/archive/NAME/TIMESTAMP/ directories hold the archive NAME as it was at TIMESTAMP
(YYYYMMDDTHHMMSSZ). A request for snapshot/archive/NAME/T/PATH is answered from the newest snapshot
at or before T, as the snapshot service answers any timestamp (it redirects; this one serves the
file). Anything else is served from DIR as it is.
"""
import http.server
import os
import re

SNAPSHOT = re.compile(r"^/snapshot/archive/([^/]+)/([0-9]{8}T[0-9]{6}Z)(/.*)?$")


class IndexHandler(http.server.SimpleHTTPRequestHandler):
    def translate_path(self, path):
        m = SNAPSHOT.match(path.split("?", 1)[0])
        if m:
            name, stamp, rest = m.group(1), m.group(2), m.group(3) or "/"
            base = os.path.join(self.directory, "snapshot", "archive", name)
            taken = sorted(s for s in os.listdir(base) if s <= stamp) if os.path.isdir(base) else []
            if taken:
                path = f"/snapshot/archive/{name}/{taken[-1]}{rest}"
        return super().translate_path(path)
