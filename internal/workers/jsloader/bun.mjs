// The runtime's loader for Bun: bun bun.mjs <entry>. Bun.serve serves the default export's
// fetch and routes on PORT; handed descriptor 3, it serves on a port of the worker's own
// loopback, and a forwarder accepting on descriptor 3 passes each connection on to it
// (Bun.serve cannot accept on a descriptor it is given; Bun.listen can). What each start
// runs is kept to that: it is most of what a cold start costs over a bare bun run.
import { activated, guard, guardRoutes, load } from "./common.mjs";

const app = await load(process.argv[2]);
const options = {
  fetch: app.fetch ? guard(app.fetch.bind(app)) : () => new Response("Not Found", { status: 404 }),
  // Bun.serve's own idle timeout (10 s) would cut a request whose handler has written nothing
  // yet: the runtime bounds each request (timeout) and closes the connections it keeps idle.
  idleTimeout: 0,
};
if (app.routes) options.routes = guardRoutes(app.routes);
if (activated) {
  options.hostname = "127.0.0.1";
  options.port = 0;
  const { forward } = await import("./forward.mjs");
  forward(3, Bun.serve(options).port);
} else {
  options.hostname = process.env.HOST;
  options.port = Number(process.env.PORT);
  Bun.serve(options);
}
