package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestCommittedDocument checks that internal/ui/openapi.json, from which make ui generates the cpanel's
// types, is the document of the route table as it is: a change of the API without make ui
// fails here, before the types drift.
func TestCommittedDocument(t *testing.T) {
	file := filepath.Join(t.TempDir(), "openapi.json")
	if err := write(file); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("../../internal/ui/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, committed) {
		t.Error("internal/ui/openapi.json is not the document of the route table: run make ui and commit what it writes")
	}
}
