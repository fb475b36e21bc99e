"""A process worker with a schedule and a database (examples/cron-db).

The runtime sends POST /tasks/tick at each tick of the manifest's cron entry, with the header
Runtime-Cron naming the entry; it removes that header from every visitor's request, so the
worker can refuse the task to anyone else. Each tick is a row of the worker's own database,
which outlives its processes, versions and restarts: GET / tells how many ticks it holds and the
last one. DATABASE_URL names the database: a file: URL on one instance (a SQLite file, opened
with sqlite3), the runtime's endpoint in sync and cluster mode (Hrana over HTTP, as a libSQL
client speaks it; see examples/db for a guestbook on the same two paths).
"""

import json
import os
import socket
import sqlite3
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

URL = os.environ["DATABASE_URL"]
TABLE = "CREATE TABLE IF NOT EXISTS ticks (at REAL NOT NULL, trigger TEXT NOT NULL, request_id TEXT NOT NULL)"


def query(sql, *args):
    """Creates the table if need be, runs sql with args and returns its rows as lists."""
    if URL.startswith("file:"):
        with sqlite3.connect(URL[len("file:"):], timeout=5) as db:
            db.execute(TABLE)
            return [list(row) for row in db.execute(sql, args)]
    url = urllib.parse.urlsplit(URL)
    token = urllib.parse.parse_qs(url.query).get("authToken", [""])[0]
    values = [{"type": "float", "value": a} if isinstance(a, float) else {"type": "text", "value": a} for a in args]
    pipeline = {"requests": [{"type": "execute", "stmt": {"sql": TABLE}},
                             {"type": "execute", "stmt": {"sql": sql, "args": values}}, {"type": "close"}]}
    request = urllib.request.Request(url.scheme + "://" + url.netloc + "/v2/pipeline", json.dumps(pipeline).encode(),
                                     {"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as resp:
        results = json.load(resp)["results"]
    failed = [r["error"]["message"] for r in results if r["type"] == "error"]
    if failed:
        raise RuntimeError(failed[0])
    return [[cell["value"] for cell in row] for row in results[1]["response"]["result"]["rows"]]


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        trigger = self.headers.get("Runtime-Cron")
        if self.path != "/tasks/tick":
            return self.answer(404, {"error": "no such task"})
        if not trigger:
            return self.answer(403, {"error": "only the runtime's cron runs /tasks/tick"})
        query("INSERT INTO ticks (at, trigger, request_id) VALUES (?, ?, ?)",
              time.time(), trigger, self.headers.get("X-Request-Id", ""))
        self.answer(200, {"done": True})

    def do_GET(self):
        count = query("SELECT count(*) FROM ticks")[0][0]
        rows = query("SELECT at, trigger, request_id FROM ticks ORDER BY rowid DESC LIMIT 1")
        last = {"at": float(rows[0][0]), "trigger": rows[0][1], "requestId": rows[0][2]} if rows else None
        self.answer(200, {"message": "Hello from a worker with a schedule", "ticks": int(count), "last": last})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):  # one line per request on stdout, which the runtime logs
        print(fmt % args, flush=True)


if os.environ.get("LISTEN_FDS"):  # worker_network isolated: the listener is descriptor 3
    server = ThreadingHTTPServer(("", 0), Handler, bind_and_activate=False)
    server.socket = socket.socket(fileno=3)
else:
    server = ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ["PORT"])), Handler)
server.serve_forever()
