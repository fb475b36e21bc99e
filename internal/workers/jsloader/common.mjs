// The part of the runtime's JavaScript loaders every engine shares: importing the worker's
// module, checking its default export, answering a handler that throws with 500, and a route
// table for the engines whose server has none (Bun's has).

// load imports the worker's module (an absolute path) and returns its default export, or
// exits with a line saying what is wrong, which the runtime reports as the failed start.
export async function load(entry) {
  const mod = await import(entry);
  const app = mod.default;
  if (!app || (typeof app.fetch !== "function" && (typeof app.routes !== "object" || app.routes === null))) {
    console.error(`the default export of ${entry} has neither fetch nor routes: write export default { fetch(request) { return new Response("Hello") } }`);
    process.exit(1);
  }
  return app;
}

// failed answers a request whose handler threw: 500 in the runtime's error envelope, naming
// the request id the runtime gave it, and the error on standard error (the worker's logs).
export function failed(request, err) {
  const id = request.headers.get("x-request-id") || "";
  console.error(`request ${id}: ${err && err.stack ? err.stack : err}`);
  return Response.json(
    { error: { code: "WORKER_ERROR", message: `the worker threw while answering request ${id}; its logs have the error` } },
    { status: 500 },
  );
}

// guard wraps a handler so a throw or a rejection answers failed. A handler's Response is
// passed on as it came, not wrapped in a promise: Bun answers a synchronous one on a faster
// path, about half a millisecond sooner at a cold start's first request.
export function guard(handler) {
  return (request, ...rest) => {
    try {
      const answer = handler(request, ...rest);
      return answer instanceof Promise ? answer.catch((err) => failed(request, err)) : answer;
    } catch (err) {
      return failed(request, err);
    }
  };
}

// methods reports whether a route's value is a table of handlers by method ({GET: …}): a
// plain object, not a Response, a file or an HTML import.
const methods = (value) => value !== null && typeof value === "object" && [Object.prototype, null].includes(Object.getPrototypeOf(value));

// guardRoutes wraps every handler of a Bun route table ({path: Response | handler |
// {GET: …}}), keeping the rest as it is.
export function guardRoutes(routes) {
  if (!routes) return undefined;
  const out = {};
  for (const [path, value] of Object.entries(routes)) {
    if (typeof value === "function") out[path] = guard(value);
    else if (methods(value)) {
      out[path] = Object.fromEntries(Object.entries(value).map(([m, h]) => [m, typeof h === "function" ? guard(h) : h]));
    } else out[path] = value;
  }
  return out;
}

const notFound = () => new Response("Not Found", { status: 404 });

// handler is the one fetch handler of app for an engine without a route table: its routes
// first (":name" matches a segment, a final "*" the rest; request.params holds the names),
// then its fetch, else 404.
export function handler(app) {
  const table = Object.entries(app.routes || {}).map(([path, value]) => [path.split("/"), value]);
  const fetch = app.fetch ? guard(app.fetch.bind(app)) : notFound;
  return async (request, ...rest) => {
    const segments = new URL(request.url).pathname.split("/");
    for (const [pattern, value] of table) {
      const params = match(pattern, segments);
      if (!params) continue;
      let h = value;
      if (methods(h)) h = h[request.method] ?? (request.method === "HEAD" ? h.GET : undefined);
      if (h instanceof Response) return h.clone();
      if (typeof h !== "function") return new Response("Method Not Allowed", { status: 405 });
      Object.defineProperty(request, "params", { value: params });
      return guard(h)(request, ...rest);
    }
    return fetch(request, ...rest);
  };
}

function match(pattern, segments) {
  const params = {};
  for (let i = 0; i < pattern.length; i++) {
    const p = pattern[i];
    if (p === "*" && i === pattern.length - 1) return params;
    if (i >= segments.length) return null;
    if (p.startsWith(":")) params[p.slice(1)] = decodeURIComponent(segments[i]);
    else if (p !== segments[i]) return null;
  }
  return pattern.length === segments.length ? params : null;
}

// activated reports whether the runtime handed the worker its listener as descriptor 3
// (socket activation: listen: socket, or worker_network isolated).
export const activated = process.env.LISTEN_FDS === "1";
