package riverjobs_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/expiryctl/expiryctl/internal/adapter/riverjobs"
)

func TestParseRef(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "")
	tests := []struct {
		in                          string
		name, user, states, sslMode string
	}{
		{in: "river://db.internal/jobs/expiry", name: "river://db.internal:5432/jobs/expiry", states: "discarded"},
		{in: "RIVER://app@DB.internal:6543/jobs/expiry?sslmode=verify-full", name: "river://db.internal:6543/jobs/expiry",
			user: "app", states: "discarded", sslMode: "verify-full"},
		{in: "river://app:s3cret@10.0.0.5/jobs/expiry?states=cancelled,discarded", name: "river://10.0.0.5:5432/jobs/expiry",
			user: "app", states: "cancelled,discarded"},
		{in: "river://[::1]:5433/jobs/expiry?states=discarded,discarded", name: "river://[::1]:5433/jobs/expiry", states: "discarded"},
		{in: "river://h/my%20db/expiry", name: "river://h:5432/my%20db/expiry", states: "discarded"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			ref, err := riverjobs.ParseRef(tt.in)
			if err != nil {
				t.Fatalf("ParseRef: %v", err)
			}
			if ref.Name() != tt.name || ref.User != tt.user || strings.Join(ref.States, ",") != tt.states {
				t.Errorf("got %s user %q states %v; want %s user %q states %s", ref.Name(), ref.User, ref.States, tt.name, tt.user, tt.states)
			}
			if !riverjobs.IsRef(tt.in) {
				t.Error("IsRef is false")
			}
			if s := fmt.Sprintf("%v %+v %#v %s", ref, ref, ref, ref); strings.Contains(s, "s3cret") {
				t.Errorf("a printed Ref shows the password: %s", s)
			}
			cfg, err := ref.PoolConfig()
			if err != nil {
				t.Fatalf("PoolConfig: %v", err)
			}
			if cfg.ConnConfig.Database != ref.Database || cfg.ConnConfig.Port != uint16(ref.Port) {
				t.Errorf("connection config reaches %s:%d, want %s:%d", cfg.ConnConfig.Database, cfg.ConnConfig.Port, ref.Database, ref.Port)
			}
		})
	}
}

func TestParseRefRefusesWithoutShowingThePassword(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "")
	for _, in := range []string{
		"river://app:s3cret@host:99999/jobs/expiry",
		"river://app:s3cret@host/jobs",
		"river://app:s3cret@host/jobs/",
		"river://app:s3cret@/jobs/expiry",
		"river://app:s3cret@host/jobs/expiry?states=completed",
		"river://app:s3cret@host/jobs/expiry?sslmode=maybe",
		"river://app:s3cret@host/jobs/expiry?search_path=evil",
		"river://app:s3cret@host:port/jobs/expiry",
		"river://app:s3cret@ho st/jobs/expiry%zz",
		"river://app:s3cret@host/jobs/" + strings.Repeat("q", 128),
	} {
		_, err := riverjobs.ParseRef(in)
		if err == nil {
			t.Errorf("ParseRef(%s) took it", in)
			continue
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("ParseRef's error shows the password: %v", err)
		}
	}
	if riverjobs.IsRef("postgres://host/db") {
		t.Error("IsRef took a postgres URL")
	}
}

func TestParseRefTakesThePasswordFromTheEnvironment(t *testing.T) {
	t.Setenv(riverjobs.PasswordEnv, "from-env")
	ref, err := riverjobs.ParseRef("river://app@host/jobs/expiry")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := ref.PoolConfig()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConnConfig.Password != "from-env" || cfg.ConnConfig.User != "app" {
		t.Errorf("login %q password %q, want app with the environment's", cfg.ConnConfig.User, cfg.ConnConfig.Password)
	}
	ref, _ = riverjobs.ParseRef("river://app:in-url@host/jobs/expiry")
	if cfg, _ := ref.PoolConfig(); cfg.ConnConfig.Password != "in-url" {
		t.Errorf("password %q, want the reference's own", cfg.ConnConfig.Password)
	}
}
