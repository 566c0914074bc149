package approval_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/expiryctl/expiryctl/approval"
)

func statement() approval.Statement {
	return approval.Statement{Database: "expiryctl", Request: 7, Kind: "replay", Cohort: "3f9a", Items: 40,
		Targets: []string{`"reservations" "reservation.expire" 40`}, Rate: 50, Canary: 5, Stop: "failure-ratio=0.05",
		Requester: "alice", Approver: "bob", Expires: time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)}
}

func TestStatementRoundTrip(t *testing.T) {
	t.Parallel()
	s := statement()
	got, err := approval.ParseStatement(s.Text())
	if err != nil || got.Text() != s.Text() {
		t.Fatalf("ParseStatement = %+v, %v", got, err)
	}
	for name, text := range map[string]string{
		"another kind":     strings.Replace(s.Text(), "v1", "v2", 1),
		"a line twice":     s.Text() + "rate 50\n",
		"an unknown field": s.Text() + "note hello\n",
		"out of order":     strings.Replace(strings.Replace(s.Text(), "rate 50\n", "", 1), "canary 5\n", "canary 5\nrate 50\n", 1),
	} {
		if _, err := approval.ParseStatement(text); err == nil {
			t.Errorf("%s: parsed", name)
		}
	}
	other := s
	other.Rate = 500
	if d := s.Differences(other); len(d) != 1 || !strings.Contains(d[0], `"rate 500"`) {
		t.Errorf("Differences = %q", d)
	}
}

func TestSignedByTheKeyringOnly(t *testing.T) {
	t.Parallel()
	bobKey, bobVerifier, err := approval.GenerateKey("bob")
	if err != nil {
		t.Fatal(err)
	}
	malloryKey, _, _ := approval.GenerateKey("mallory")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bob.vkey"), []byte("# bob\n"+bobVerifier+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	keyring, err := approval.LoadKeyring(dir)
	if err != nil || len(keyring.Owners()) != 1 {
		t.Fatalf("LoadKeyring = %v, %v", keyring, err)
	}
	signed, err := approval.Sign(statement(), bobKey)
	if err != nil {
		t.Fatal(err)
	}
	if s, err := keyring.Open(signed); err != nil || s.Request != 7 {
		t.Fatalf("Open = %+v, %v", s, err)
	}
	if _, err := approval.Sign(statement(), malloryKey); err == nil || !strings.Contains(err.Error(), "named \"mallory\"") {
		t.Errorf("a key signed for another approver: %v", err)
	}
	forMallory := statement()
	forMallory.Approver = "mallory"
	signedByMallory, _ := approval.Sign(forMallory, malloryKey)
	if _, err := keyring.Open(signedByMallory); err == nil || !strings.Contains(err.Error(), "not in the keyring") {
		t.Errorf("a key outside the keyring: %v", err)
	}
	edited := []byte(strings.Replace(string(signed), "rate 50", "rate 500", 1))
	if _, err := keyring.Open(edited); err == nil {
		t.Error("an edited statement verified")
	}
	if _, err := approval.LoadKeyring(filepath.Join(dir, "none")); err == nil {
		t.Error("a missing keyring loaded")
	}
}
