package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/integration/harness"
	"github.com/caddy-runtime/runtime/internal/testkit"
)

// jsEnvWorker answers /html with an HTML page and anything else with the variables it was
// given, as JSON, on every engine (Deno's environment is Deno.env, the others' process.env).
const jsEnvWorker = `const env = typeof Deno !== "undefined" ? Deno.env.toObject() : process.env;

export default {
  fetch(req) {
    if (new URL(req.url).pathname === "/html") {
      return new Response("<!doctype html><html><head><title>t</title></head><body>hi</body></html>", { headers: { "content-type": "text/html; charset=utf-8" } });
    }
    return Response.json(env);
  },
};
`

// TestJSManifestKeys: the code-worker keys hold under each engine: the version's .env is
// merged over the manifest's env (its value winning), and the variables named with an
// envPrefix reach the worker's HTML answers as window.__env__, while a secret, even one whose
// name matches and which env also names, reaches the worker's environment alone; no other
// .env file (.env.local) is read, by the runtime or the engine.
func TestJSManifestKeys(t *testing.T) {
	t.Parallel()
	for _, e := range jsEngines {
		t.Run(e.name, func(t *testing.T) {
			t.Parallel()
			s := harness.Start(t, harness.Config{App: "js_runtime " + e.binary(t), Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey, "RUNTIME_SECRETS_KEY": newSecretsKey(t)}})
			uploadOK(t, s, "workers", "app.tgz", jsArchive(t, "app", "env: {SHARED: from-env, ONLY_ENV: env, PUBLIC_GREETING: hi, PUBLIC_TOKEN: placeholder, PRIVATE_KEY: hidden}\n",
				harness.File{Name: "index.js", Body: jsEnvWorker},
				harness.File{Name: ".env", Body: "SHARED=from-dotenv\nexport ONLY_DOTENV='dot env'\nVITE_MODE=dev\n"},
				harness.File{Name: ".env.local", Body: "FROM_LOCAL=1\n"}), rootKey)
			setSecret(t, s, rootKey, "app", "PUBLIC_TOKEN", "s3cret-value")

			var env map[string]string
			testkit.EventuallyNil(t, 15*time.Second, func() error { // the secret's change restarts the worker
				resp := s.Get("/app/env")
				if resp.Status != 200 || resp.JSON(&env) != nil || env["PUBLIC_TOKEN"] != "s3cret-value" {
					return fmt.Errorf("GET /app/env = %s", resp)
				}
				return nil
			})
			for name, want := range map[string]string{"SHARED": "from-dotenv", "ONLY_ENV": "env", "ONLY_DOTENV": "dot env", "VITE_MODE": "dev", "PRIVATE_KEY": "hidden"} {
				if env[name] != want {
					t.Errorf("the worker's %s = %q, want %q", name, env[name], want)
				}
			}
			// .env alone is the version's: no engine loads another file of its own accord (Bun would).
			if got, ok := env["FROM_LOCAL"]; ok {
				t.Errorf("the worker's FROM_LOCAL = %q, from .env.local, which the runtime does not read", got)
			}
			resp := s.Get("/app/html")
			page := string(resp.Body)
			if want := `<head><script>window.__env__={"PUBLIC_GREETING":"hi","VITE_MODE":"dev"};</script><title>`; resp.Status != 200 || !strings.Contains(page, want) {
				t.Errorf("GET /app/html = %s, want the public variables after <head>: %s", resp, want)
			}
			for _, leak := range []string{"s3cret-value", "placeholder", "PUBLIC_TOKEN", "hidden"} {
				if strings.Contains(page, leak) {
					t.Errorf("GET /app/html shows %q: %s", leak, page)
				}
			}
		})
	}
}
