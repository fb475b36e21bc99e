"""A process worker with a schedule (examples/cron-db).

The runtime sends POST /tasks/tick at each tick of the manifest's cron entry, with the header
Runtime-Cron naming the entry; it removes that header from every visitor's request, so the
worker can refuse the task to anyone else. GET / tells how many ticks this process received.
"""

import json
import os
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ticks = []  # the ticks this process received, oldest first
lock = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        trigger = self.headers.get("Runtime-Cron")
        if self.path != "/tasks/tick":
            return self.answer(404, {"error": "no such task"})
        if not trigger:
            return self.answer(403, {"error": "only the runtime's cron runs /tasks/tick"})
        with lock:
            ticks.append({"at": time.time(), "trigger": trigger, "requestId": self.headers.get("X-Request-Id", "")})
        self.answer(200, {"done": True})

    def do_GET(self):
        with lock:
            last = ticks[-1] if ticks else None
            body = {"message": "Hello from a worker with a schedule", "ticks": len(ticks), "last": last}
        self.answer(200, body)

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
