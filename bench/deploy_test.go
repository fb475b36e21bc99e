package bench

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/caddy-runtime/runtime/integration/harness"
)

// BenchmarkDeploy compares `runtime deploy` of a folder of about 10 MB (2 000 files of
// incompressible content) with what it replaces, `tar -czf` of the folder and a bare curl
// upload of the result, against one runtime, round by round; both install the same version
// again each time.
func BenchmarkDeploy(b *testing.B) {
	tarBin, errTar := exec.LookPath("tar")
	curlBin, errCurl := exec.LookPath("curl")
	if errTar != nil || errCurl != nil {
		b.Skip("tar or curl is missing on this machine")
	}
	s := harness.Start(b, harness.Config{Env: map[string]string{"RUNTIME_ROOT_KEY": rootKey}})
	dir := filepath.Join(b.TempDir(), "big")
	rng := rand.NewChaCha8([32]byte{2})
	write := func(name string, body []byte) {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write("manifest.yaml", []byte("name: big\nversion: 1.0.0\n"))
	for i := range 2000 {
		body := make([]byte, 5000)
		rng.Read(body)
		write(fmt.Sprintf("assets/d%02d/file%04d.bin", i%40, i), body)
	}
	work := b.TempDir()
	archive := filepath.Join(work, "big.tgz")
	deploy := exec.Command(harness.Binary(b), "runtime", "deploy", dir, "--url", s.URL, "--key", rootKey)
	deploy.Env = []string{"HOME=" + work, "XDG_CONFIG_HOME=" + work, "PATH=" + os.Getenv("PATH")}
	run := func(b *testing.B, name string, args ...string) {
		cmd := exec.Command(name, args...)
		if name == deploy.Path {
			cmd.Env = deploy.Env
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			b.Fatalf("%s %v: %v\n%s", name, args, err, out)
		}
	}
	for range *rounds {
		b.Run("cli", func(b *testing.B) {
			for range b.N {
				run(b, deploy.Path, deploy.Args[1:]...)
			}
		})
		b.Run("tar-curl", func(b *testing.B) {
			for range b.N {
				run(b, tarBin, "-czf", archive, "-C", dir, ".")
				run(b, curlBin, "-sf", "-o", os.DevNull, "-H", "X-API-Key: "+rootKey, "-H", "Origin: "+s.URL,
					"-F", "file=@"+archive, s.URL+s.API+"/workers/upload")
			}
		})
	}
}
