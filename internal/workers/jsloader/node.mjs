// The runtime's loader for Node: node node.mjs <entry> [<transpiled folder>]. A TypeScript
// module runs as the runtime transpiled it (hooks.mjs); the default export is served by
// node:http on PORT or on descriptor 3.
import { register } from "node:module";
import { activated, handler, load } from "./common.mjs";
import { serve } from "./nodehttp.mjs";

const [entry, transpiled] = process.argv.slice(2);
if (transpiled) register(new URL("./hooks.mjs", import.meta.url), { data: { transpiled } });
const app = await load(entry);
serve(handler(app), activated ? { fd: 3 } : { port: Number(process.env.PORT), host: process.env.HOST });
