package commands

import (
	"errors"
	"testing"
	"time"
)

func TestTimeoutSettingsFlagOverEnvironmentOverDefault(t *testing.T) {
	for _, tc := range []struct {
		name      string
		args      []string
		env       map[string]string
		db, hb    time.Duration
		wantUsage bool
	}{
		{name: "defaults", db: 30 * time.Second, hb: 10 * time.Second},
		{name: "environment", env: map[string]string{"EXPIRYCTL_DB_TIMEOUT": "5s", "EXPIRYCTL_AMQP_HEARTBEAT": "2s"}, db: 5 * time.Second, hb: 2 * time.Second},
		{name: "flag wins", args: []string{"--db-timeout", "0", "--amqp-heartbeat", "3s"}, env: map[string]string{"EXPIRYCTL_DB_TIMEOUT": "5s"}, db: 0, hb: 3 * time.Second},
		{name: "bad environment", env: map[string]string{"EXPIRYCTL_DB_TIMEOUT": "soon"}, wantUsage: true},
		{name: "heartbeat below a second", args: []string{"--amqp-heartbeat", "500ms"}, db: 30 * time.Second, wantUsage: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, _, _ := testFactory(t)
			f.Getenv = func(k string) string { return tc.env[k] }
			root := NewCmdRoot(f)
			if err := root.PersistentFlags().Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			db, dbErr := f.DBTimeout()
			hb, hbErr := f.AMQPHeartbeat()
			var flagErr *FlagError
			if tc.wantUsage {
				if !errors.As(dbErr, &flagErr) && !errors.As(hbErr, &flagErr) {
					t.Fatalf("want a usage error, got %v and %v", dbErr, hbErr)
				}
				return
			}
			if dbErr != nil || hbErr != nil || db != tc.db || hb != tc.hb {
				t.Errorf("db %s (%v), heartbeat %s (%v); want %s and %s", db, dbErr, hb, hbErr, tc.db, tc.hb)
			}
		})
	}
}
