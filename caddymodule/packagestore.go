package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/caddy-runtime/runtime/internal/config"
	"github.com/caddy-runtime/runtime/internal/packagestore"
	"github.com/caddy-runtime/runtime/internal/troubleshooting"
)

func init() {
	caddy.RegisterModule(new(S3Store))
	caddy.RegisterModule(new(LocalStore))
}

// storeNamespace is the namespace of the package stores, the runtime app's package_store.
const storeNamespace = "runtime.package_stores"

// PackageStore is a module of the runtime.package_stores namespace: where the instances of a
// cluster keep the archives of uploaded workers and plugins. Provision builds the store without
// sending anything (caddy validate runs it); the runtime checks it when the state starts.
type PackageStore interface {
	// PackageStore returns the store, nil for the local folders only, and its settings,
	// which identify it (a reload with other settings starts a new state).
	PackageStore() (packagestore.Store, config.StoreSettings)
}

// S3Store is the runtime.package_stores.s3 module: an S3-compatible object store (AWS S3,
// Cloudflare R2, Backblaze B2, SeaweedFS, Ceph RGW, Garage, versitygw …) through the AWS SDK
// for Go v2. Each field left unset falls back to its RUNTIME_S3_* environment variable; with
// neither key set, the SDK's standard credential chain applies.
type S3Store struct {
	config.S3Values

	settings config.S3Settings
	store    *packagestore.S3
}

// CaddyModule returns the Caddy module information.
func (*S3Store) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: storeNamespace + ".s3", New: func() caddy.Module { return new(S3Store) }}
}

// Provision resolves the settings (placeholders, then the environment) and builds the client;
// nothing is sent.
func (s *S3Store) Provision(ctx caddy.Context) error {
	if s.SecretAccessKey != "" && !strings.Contains(s.SecretAccessKey, "{") {
		ctx.Logger().Warn("package_store s3 secret_access_key is written literally in the config, where the admin API and adapted JSON show it; "+
			"use {env."+config.Lookup("secret_access_key").Env+"} instead", troubleshooting.S3SecretInConfig.Field())
	}
	v := s.S3Values
	replacePlaceholders(v.StringFields(), nil)
	settings, err := config.ResolveS3(v, os.Getenv)
	if err != nil {
		return err
	}
	store, err := packagestore.New(ctx, s3Options(settings))
	if err != nil {
		return err
	}
	s.settings, s.store = settings, store
	return nil
}

// PackageStore returns the store and its settings.
func (s *S3Store) PackageStore() (packagestore.Store, config.StoreSettings) {
	return s.store, config.StoreSettings{Kind: config.StoreS3, S3: s.settings}
}

// s3Options are the store's options of the settings.
func s3Options(s config.S3Settings) packagestore.Options {
	return packagestore.Options{Endpoint: s.Endpoint, Bucket: s.Bucket, Region: s.Region, Prefix: s.Prefix,
		AccessKeyID: s.AccessKeyID, SecretAccessKey: s.SecretAccessKey, PathStyle: s.PathStyle}
}

// LocalStore is the runtime.package_stores.local module: no package store, each instance
// keeping its units in its own folders (the default). Written, it overrides
// RUNTIME_PACKAGE_STORE.
type LocalStore struct{}

// CaddyModule returns the Caddy module information.
func (*LocalStore) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: storeNamespace + ".local", New: func() caddy.Module { return new(LocalStore) }}
}

// PackageStore returns no store.
func (*LocalStore) PackageStore() (packagestore.Store, config.StoreSettings) {
	return nil, config.StoreSettings{Kind: config.StoreLocal}
}

// loadPackageStore loads the package store the app writes, or else the one
// RUNTIME_PACKAGE_STORE selects, and checks it against the app's other settings; fromEnv says
// whether the environment chose it.
func (a *App) loadPackageStore(ctx caddy.Context) (store packagestore.Store, settings config.StoreSettings, fromEnv bool, err error) {
	var mod any
	if a.PackageStoreRaw != nil {
		if mod, err = ctx.LoadModule(a, "PackageStoreRaw"); err != nil {
			return nil, settings, false, fmt.Errorf("package_store: %w", err)
		}
	} else {
		kind, err := config.StoreFromEnv(os.Getenv)
		if err != nil {
			return nil, settings, true, err
		}
		if mod, err = ctx.LoadModuleByID(storeNamespace+"."+kind, []byte("{}")); err != nil {
			return nil, settings, true, err
		}
		fromEnv = kind != config.StoreLocal
	}
	ps, ok := mod.(PackageStore)
	if !ok {
		return nil, settings, fromEnv, fmt.Errorf("package_store: module %T is not a package store", mod)
	}
	store, settings = ps.PackageStore()
	return store, settings, fromEnv, nil
}

// checkPackageStore stops start-up when the store cannot be used, saying what is wrong.
func checkPackageStore(ctx context.Context, store packagestore.Store) error {
	err := store.Check(ctx)
	var hint string
	switch {
	case err == nil:
		return nil
	case errors.Is(err, packagestore.ErrNoBucket):
		hint = "create the bucket, or correct package_store s3 bucket"
	case errors.Is(err, packagestore.ErrDenied):
		hint = "check package_store s3 access_key_id and secret_access_key (or, with neither set, the AWS SDK's credential chain)"
	case errors.Is(err, packagestore.ErrUnavailable):
		hint = "check package_store s3 endpoint and that the store is up"
	default:
		hint = "check the package_store settings"
	}
	return fmt.Errorf("package_store: the store cannot be used: %w; %s", err, hint)
}

// Interface guards
var (
	_ caddy.Provisioner = (*S3Store)(nil)
	_ PackageStore      = (*S3Store)(nil)
	_ PackageStore      = (*LocalStore)(nil)
)
