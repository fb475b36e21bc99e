package keystore

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/caddy-runtime/runtime/internal/testkit"
)

// TestDomains: a domain attaches to one worker at a time, with a token; a check records its
// outcome; a removed domain is gone from the listing and may attach elsewhere; every change
// signals DomainsChanged.
func TestDomains(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "keys.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	by := Principal{ID: 7, KeyPrefix: "rt_abc"}
	signalled := func(what string) {
		t.Helper()
		select {
		case <-s.DomainsChanged():
		default:
			t.Errorf("%s did not signal DomainsChanged", what)
		}
	}
	d, err := s.AttachDomain(ctx, "shop.example.org", "@team/shop", by)
	if err != nil || d.Token == "" || d.Scope != "@team" || d.Verified() {
		t.Fatalf("attach = %+v, %v", d, err)
	}
	signalled("attach")
	again, err := s.AttachDomain(ctx, "shop.example.org", "@team/shop", by)
	if err != nil || again.Token != d.Token {
		t.Errorf("attaching again = %+v, %v; want the same token", again, err)
	}
	if _, err := s.AttachDomain(ctx, "shop.example.org", "other", by); !errors.Is(err, ErrDomainTaken) {
		t.Errorf("attach to another worker = %v", err)
	}
	failed, err := s.RecordDomainCheck(ctx, "shop.example.org", "@team/shop", false, "no TXT record")
	if err != nil || failed.Verified() || failed.CheckError != "no TXT record" || failed.CheckedAt == 0 {
		t.Errorf("failed check = %+v, %v", failed, err)
	}
	passed, err := s.RecordDomainCheck(ctx, "shop.example.org", "@team/shop", true, "")
	if err != nil || !passed.Verified() || passed.CheckError != "" {
		t.Errorf("passed check = %+v, %v", passed, err)
	}
	if _, err := s.RecordDomainCheck(ctx, "shop.example.org", "other", true, ""); !errors.Is(err, ErrDomainNotFound) {
		t.Errorf("check of another worker's domain = %v", err)
	}
	if list, err := s.Domains(ctx, "@team/shop"); err != nil || len(list) != 1 || !list[0].Verified() {
		t.Errorf("Domains = %+v, %v", list, err)
	}
	if err := s.RemoveDomain(ctx, "shop.example.org", "other", by); !errors.Is(err, ErrDomainNotFound) {
		t.Errorf("removing through another worker = %v", err)
	}
	if err := s.RemoveDomain(ctx, "shop.example.org", "@team/shop", by); err != nil {
		t.Fatal(err)
	}
	signalled("remove")
	if list, _ := s.Domains(ctx, ""); len(list) != 0 {
		t.Errorf("after removal: %+v", list)
	}
	moved, err := s.AttachDomain(ctx, "shop.example.org", "other", by)
	if err != nil || moved.Token == d.Token || moved.Verified() {
		t.Errorf("attach after removal = %+v, %v; want a new, unverified row", moved, err)
	}
}

// TestSyncSharesDomains: a domain attached, verified and removed on one instance reaches
// another by its pulls, which signal DomainsChanged there.
func TestSyncSharesDomains(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	primary := testkit.StartSqld(t)
	a, _ := syncStore(t, primary, time.Hour)
	b, _ := syncStore(t, primary, 200*time.Millisecond)
	if _, err := a.AttachDomain(ctx, "shop.example.org", "shop", Principal{}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.RecordDomainCheck(ctx, "shop.example.org", "shop", true, ""); err != nil {
		t.Fatal(err)
	}
	state := func() error {
		list, err := b.Domains(ctx, "")
		switch {
		case err != nil:
			return err
		case len(list) != 1 || !list[0].Verified():
			return fmt.Errorf("B holds %+v", list)
		}
		return nil
	}
	testkit.EventuallyNil(t, 5*time.Second, state)
	select {
	case <-b.DomainsChanged():
	default:
	}
	if err := a.RemoveDomain(ctx, "shop.example.org", "shop", Principal{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.DomainsChanged(): // the pull that brings the removal
	case <-time.After(5 * time.Second):
		t.Fatal("B's pull did not signal DomainsChanged")
	}
	testkit.EventuallyNil(t, 5*time.Second, func() error {
		if list, err := b.Domains(ctx, ""); err != nil || len(list) != 0 {
			return fmt.Errorf("after removal on A, B holds %+v, %v", list, err)
		}
		return nil
	})
}
