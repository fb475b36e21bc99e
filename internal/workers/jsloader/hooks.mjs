// Module hooks of the Node loader: a TypeScript file is loaded as the runtime transpiled it
// before the start, found by the SHA-256 of its source in the worker's transpiled folder;
// its URL stays its own, so its imports resolve from the worker's folder.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";

let transpiled;
const typescript = /\.(ts|mts|cts|tsx|jsx)$/;

export function initialize(data) {
  transpiled = data.transpiled;
}

export async function load(url, context, next) {
  if (!url.startsWith("file:") || !typescript.test(url)) return next(url, context);
  const source = await readFile(fileURLToPath(url));
  const sum = createHash("sha256").update(source).digest("hex");
  return { format: "module", source: await readFile(`${transpiled}/${sum}.mjs`), shortCircuit: true };
}
