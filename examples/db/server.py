"""A guestbook kept in the worker's own database.

GET / lists the entries as JSON; POST /?name=NAME adds one. The database is the one
DATABASE_URL names: a file: URL (one instance: a SQLite file, opened with sqlite3) or an
http: URL (sync and cluster mode: the runtime's endpoint, spoken to in Hrana over HTTP as any
libSQL client would; with a libSQL client library, `libsql_client.create_client_sync(URL)`
takes both kinds as they are).
"""
import http.server
import json
import os
import socket
import sqlite3
import urllib.parse
import urllib.request

URL = os.environ["DATABASE_URL"]
SCHEMA = "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY, name TEXT NOT NULL)"


def execute(sql, args=()):
    """Runs the schema, then sql with args, and returns the rows of sql."""
    if URL.startswith("file:"):
        with sqlite3.connect(URL[len("file:"):], timeout=5) as db:
            db.execute(SCHEMA)
            return [list(row) for row in db.execute(sql, args)]
    parts = urllib.parse.urlsplit(URL)
    token = urllib.parse.parse_qs(parts.query).get("authToken", [""])[0]
    stmts = [{"sql": SCHEMA}, {"sql": sql, "args": [{"type": "text", "value": str(a)} for a in args]}]
    body = {"requests": [{"type": "execute", "stmt": s} for s in stmts] + [{"type": "close"}]}
    req = urllib.request.Request(f"{parts.scheme}://{parts.netloc}/v2/pipeline", json.dumps(body).encode(),
                                 {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as resp:
        results = json.load(resp)["results"]
    for r in results:
        if r["type"] == "error":
            raise RuntimeError(r["error"]["message"])
    return [[col["value"] for col in row] for row in results[1]["response"]["result"]["rows"]]


class Guestbook(http.server.BaseHTTPRequestHandler):
    def answer(self, status, value):
        body = json.dumps(value).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path == "/health":
            return self.answer(200, {"ok": True})
        self.answer(200, {"entries": [name for _, name in execute("SELECT id, name FROM entries ORDER BY id")]})

    def do_POST(self):
        name = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("name", [""])[0]
        if not name:
            return self.answer(400, {"error": "write ?name=…"})
        execute("INSERT INTO entries (name) VALUES (?)", (name,))
        self.answer(201, {"added": name})


if os.environ.get("LISTEN_FDS"):  # worker_network isolated: the listener is descriptor 3
    server = http.server.ThreadingHTTPServer(("", 0), Guestbook, bind_and_activate=False)
    server.socket = socket.socket(fileno=3)
else:
    server = http.server.ThreadingHTTPServer((os.environ["HOST"], int(os.environ["PORT"])), Guestbook)
server.serve_forever()
