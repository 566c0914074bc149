package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// copyLimit is what PostgreSQL alone absorbed of the subject's rows.
type copyLimit struct {
	rate float64
	wall time.Duration
	cpu  cpuUse
	// how says how the rows reached the server.
	how string
}

// databaseLimit measures the physical limit that capture is read against
// beside the broker's: the rows the subject has just stored in archive, a
// letter and its state, written again by the server itself with one COPY
// per table from a file into tables with the columns, constraints and
// indexes of dead_letters and dead_letter_states, in one transaction. No
// function, no triggers, no client encoding, no round trip per batch: what
// is left is the heap rows, their TOAST, every index and the WAL, which any
// way of capturing these rows pays. The files are written by this process
// and read by the server, so the server must share this machine's file
// system (as the CPU attribution already assumes) and the admin login must
// be allowed to read server files; otherwise the same rows are streamed
// with COPY FROM STDIN and the report says so.
func databaseLimit(ctx context.Context, archive *benchDB, n int) (copyLimit, error) {
	conn, err := archive.Pool.Acquire(ctx)
	if err != nil {
		return copyLimit{}, err
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	// LIKE copies columns, defaults, CHECK and NOT NULL constraints, the
	// primary key, the unique fingerprint and every other index, and each
	// column's storage and compression; never triggers. The identity is
	// left out, so that the rows keep their ids.
	tables := []struct{ source, copy string }{
		{"expiryctl.dead_letters", "expiryctl_bench_copy_limit"},
		{"expiryctl.dead_letter_states", "expiryctl_bench_copy_limit_states"},
	}
	files := make([]*os.File, 0, len(tables))
	defer func() {
		for _, f := range files {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	for _, t := range tables {
		f, err := os.CreateTemp("", "expiryctl-bench-rows-*.copy")
		if err != nil {
			return copyLimit{}, err
		}
		files = append(files, f)
		// The server reads the file as its own OS user.
		if err := f.Chmod(0o644); err != nil {
			return copyLimit{}, err
		}
		if _, err := pg.CopyTo(ctx, f, `COPY (SELECT * FROM `+t.source+` ORDER BY 1) TO STDOUT (FORMAT binary)`); err != nil {
			return copyLimit{}, fmt.Errorf("export the subject's rows of %s: %w", t.source, err)
		}
		if err := f.Sync(); err != nil {
			return copyLimit{}, err
		}
		if _, err := conn.Exec(ctx, `CREATE TABLE `+t.copy+` (LIKE `+t.source+`
			INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES INCLUDING STORAGE INCLUDING COMPRESSION)`); err != nil {
			return copyLimit{}, fmt.Errorf("create the limit's table %s: %w", t.copy, err)
		}
	}

	lim := copyLimit{how: "server-side COPY from a file"}
	mon := startCPU()
	start := time.Now()
	copyRows := func(fromFile bool) error {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return err
		}
		defer tx.Rollback(ctx) //nolint:errcheck // after a commit, a no-op
		for i, t := range tables {
			if fromFile {
				_, err = tx.Exec(ctx, `COPY `+t.copy+` FROM `+quoteLiteral(files[i].Name())+` (FORMAT binary)`)
			} else {
				if _, err = files[i].Seek(0, io.SeekStart); err == nil {
					_, err = pg.CopyFrom(ctx, files[i], `COPY `+t.copy+` FROM STDIN (FORMAT binary)`)
				}
			}
			if err != nil {
				return err
			}
		}
		return tx.Commit(ctx)
	}
	if err := copyRows(true); err != nil {
		// Nothing of a failed COPY is stored: the same rows over the
		// connection instead.
		lim.how = fmt.Sprintf("COPY FROM STDIN, as the server could not read the files (%v)", err)
		start = time.Now()
		err = copyRows(false)
		if err != nil {
			return copyLimit{}, fmt.Errorf("copy the rows: %w", err)
		}
	}
	lim.wall = time.Since(start)
	lim.cpu = mon.Stop()
	var got int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+tables[0].copy).Scan(&got); err != nil {
		return copyLimit{}, err
	}
	if got != n {
		return copyLimit{}, fmt.Errorf("the limit's table holds %d rows, want %d", got, n)
	}
	lim.rate = float64(n) / lim.wall.Seconds()
	return lim, nil
}

// quoteLiteral quotes s as an SQL string literal, as COPY takes no
// parameter for its file name (standard_conforming_strings, on since
// PostgreSQL 9.1, keeps backslashes literal).
func quoteLiteral(s string) string {
	return "'" + strings.ReplaceAll(s, "'", "''") + "'"
}
