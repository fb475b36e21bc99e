// A fetch handler served by node:http (Node, and Deno on descriptor 3): the request's body
// reaches the handler as a stream and the answer's body goes out as it is produced, neither
// held whole in memory.
import http from "node:http";
import { Readable } from "node:stream";

export function serve(fetch, listen) {
  const server = http.createServer(async (req, res) => {
    const controller = new AbortController();
    res.on("close", () => controller.abort());
    const headers = new Headers();
    for (let i = 0; i < req.rawHeaders.length; i += 2) headers.append(req.rawHeaders[i], req.rawHeaders[i + 1]);
    const url = new URL(req.url, `http://${req.headers.host || "localhost"}`);
    const body = req.method === "GET" || req.method === "HEAD" ? undefined : Readable.toWeb(req);
    const request = new Request(url, { method: req.method, headers, body, duplex: "half", signal: controller.signal });
    let response;
    try {
      response = await fetch(request);
    } catch (err) {
      response = new Response("Internal Server Error", { status: 500 });
      console.error(err);
    }
    const out = {};
    response.headers.forEach((value, name) => {
      if (name !== "set-cookie") out[name] = value;
    });
    const cookies = response.headers.getSetCookie();
    if (cookies.length) out["set-cookie"] = cookies;
    res.writeHead(response.status, response.statusText || undefined, out);
    if (!response.body || req.method === "HEAD") return res.end();
    try {
      for await (const chunk of response.body) {
        if (!res.write(chunk)) await new Promise((resolve) => res.once("drain", resolve));
      }
      res.end();
    } catch (err) {
      console.error(err);
      res.destroy(err);
    }
  });
  server.listen(listen);
  return server;
}
