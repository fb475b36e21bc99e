// The runtime's loader for Deno: deno run deno.mjs <entry>. Deno.serve serves the default
// export on PORT; handed descriptor 3, node:http accepts on it (Deno.serve cannot).
import { activated, handler, load } from "./common.mjs";
import { serve } from "./nodehttp.mjs";

const app = await load(Deno.args[0]);
const fetch = handler(app);
if (activated) serve(fetch, { fd: 3 });
else Deno.serve({ hostname: Deno.env.get("HOST"), port: Number(Deno.env.get("PORT")), onListen() {} }, fetch);
