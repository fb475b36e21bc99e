package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
)

// profile is a saved runtime URL and key.
type profile struct {
	URL string `json:"url"`
	Key string `json:"key"`
}

// profiles is the file login writes: one profile per server, and the one used when no
// --profile is given.
type profiles struct {
	Current  string             `json:"current,omitempty"`
	Profiles map[string]profile `json:"profiles"`
}

// profilesPath is the profiles file in the user's config folder ($XDG_CONFIG_HOME or
// ~/.config on Linux, ~/Library/Application Support on macOS, %AppData% on Windows).
func profilesPath() (string, error) {
	dir, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("finding the config folder for the profiles: %w", err)
	}
	return filepath.Join(dir, "caddy-runtime", "profiles.json"), nil
}

func loadProfiles() (profiles, string, error) {
	p := profiles{Profiles: map[string]profile{}}
	file, err := profilesPath()
	if err != nil {
		return p, "", err
	}
	data, err := os.ReadFile(file)
	if errors.Is(err, fs.ErrNotExist) {
		return p, file, nil
	}
	if err != nil {
		return p, file, err
	}
	if err := json.Unmarshal(data, &p); err != nil {
		return p, file, fmt.Errorf("%s is not a profiles file: %w", file, err)
	}
	if p.Profiles == nil {
		p.Profiles = map[string]profile{}
	}
	return p, file, nil
}

// save writes the profiles readable by the user alone: they hold keys.
func (p profiles) save(file string) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, append(data, '\n'), 0o600); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o600); err != nil { // WriteFile keeps an existing file's mode
		return err
	}
	return os.Rename(tmp, file)
}

// profileName is the name a login to rawURL gets without --profile: the server's host.
func profileName(rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.Host != "" {
		return u.Host
	}
	return rawURL
}
