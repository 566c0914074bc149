package pgboss

import "context"

// SourceExec runs sql on one of s's own sessions, for a test that shows
// what they refuse.
func SourceExec(s *Source, sql string) error {
	_, err := s.pool.Exec(context.Background(), sql)
	return err
}
