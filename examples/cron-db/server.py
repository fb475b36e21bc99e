"""A process worker with a schedule and a database (examples/cron-db).

The runtime sends POST /tasks/tick at each tick of the manifest's cron entry, with the header
Runtime-Cron naming the entry; it removes that header from every visitor's request, so the
worker can refuse the task to anyone else. Each tick is a row of the table ticks in the
worker's own database, the SQLite file DATABASE_PATH names (database: true, one instance; in
sync and cluster mode DATABASE_URL is the runtime's endpoint instead: see examples/db), so
the ticks outlive the process. GET / tells how many ticks there are and the last one.
"""

import json
import os
import sqlite3
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PATH = os.environ["DATABASE_PATH"]
SCHEMA = "CREATE TABLE IF NOT EXISTS ticks (id INTEGER PRIMARY KEY, at REAL NOT NULL, trigger TEXT NOT NULL, request_id TEXT NOT NULL)"


def execute(sql, args=()):
    """Runs the schema, then sql with args, and returns the rows of sql."""
    with sqlite3.connect(PATH, timeout=5) as db:
        db.execute(SCHEMA)
        return db.execute(sql, args).fetchall()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        trigger = self.headers.get("Runtime-Cron")
        if self.path != "/tasks/tick":
            return self.answer(404, {"error": "no such task"})
        if not trigger:
            return self.answer(403, {"error": "only the runtime's cron runs /tasks/tick"})
        execute("INSERT INTO ticks (at, trigger, request_id) VALUES (?, ?, ?)",
                (time.time(), trigger, self.headers.get("X-Request-Id", "")))
        self.answer(200, {"done": True})

    def do_GET(self):
        (count,), = execute("SELECT count(*) FROM ticks")
        rows = execute("SELECT at, trigger, request_id FROM ticks ORDER BY id DESC LIMIT 1")
        last = {"at": rows[0][0], "trigger": rows[0][1], "requestId": rows[0][2]} if rows else None
        self.answer(200, {"message": "Hello from a worker with a schedule and a database", "ticks": count, "last": last})

    def answer(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, fmt, *args):  # one line per request on stdout, which the runtime logs
        print(fmt % args, flush=True)


ThreadingHTTPServer((os.environ.get("HOST", "127.0.0.1"), int(os.environ["PORT"])), Handler).serve_forever()
