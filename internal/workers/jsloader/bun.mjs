// The runtime's loader for Bun: bun bun.mjs <entry>. Bun.serve serves the default export's
// fetch and routes on PORT; handed descriptor 3, it serves on a port of the worker's own
// loopback, and node:net passes each connection from descriptor 3 on to it (Bun.serve cannot
// accept on a descriptor it is given).
import { activated, guard, guardRoutes, load } from "./common.mjs";

const app = await load(process.argv[2]);
const options = {
  fetch: app.fetch ? guard(app.fetch.bind(app)) : () => new Response("Not Found", { status: 404 }),
  routes: guardRoutes(app.routes),
};
if (activated) {
  // Imported only here: node:net takes Bun tens of milliseconds to load, which a worker on
  // PORT would pay at every start.
  const { default: net } = await import("node:net");
  const server = Bun.serve({ ...options, hostname: "127.0.0.1", port: 0 });
  net.createServer((conn) => {
    const upstream = net.connect(server.port, "127.0.0.1");
    conn.pipe(upstream).pipe(conn);
    conn.on("error", () => upstream.destroy());
    upstream.on("error", () => conn.destroy());
  }).listen({ fd: 3 });
} else {
  Bun.serve({ ...options, hostname: process.env.HOST, port: Number(process.env.PORT) });
}
