// A TypeScript worker: the default export's routes and fetch answer its requests, in Bun, Deno
// or Node alike. Paths arrive below the worker's base (/ts-app/hello/you as /hello/you).

type Params = { params: Record<string, string> };

const started = new Date().toISOString();

export default {
  routes: {
    "/hello/:name": (req: Request & Params) => new Response(`Hello, ${req.params.name}, from TypeScript\n`),
    "/api/status": () => Response.json({ ok: true, started }),
  },
  fetch(req: Request): Response {
    return new Response(`No route for ${new URL(req.url).pathname}: try hello/you or api/status\n`, { status: 404 });
  },
};
