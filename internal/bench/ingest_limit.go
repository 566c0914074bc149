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
// beside the broker's: the rows the subject has just stored in archive,
// written again by the server itself with one COPY from a file into a
// table with dead_letters' columns, constraints and indexes, in one
// transaction. No function, no triggers, no client encoding, no round trip
// per batch: what is left is the heap row, its TOAST, every index and the
// WAL, which any way of capturing these rows pays. The file is written by
// this process and read by the server, so the server must share this
// machine's file system (as the CPU attribution already assumes) and the
// admin login must be allowed to read server files; otherwise the same rows
// are streamed with COPY FROM STDIN and the report says so.
func databaseLimit(ctx context.Context, archive *benchDB, n int) (copyLimit, error) {
	f, err := os.CreateTemp("", "expiryctl-bench-rows-*.copy")
	if err != nil {
		return copyLimit{}, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	// The server reads the file as its own OS user.
	if err := f.Chmod(0o644); err != nil {
		return copyLimit{}, err
	}
	conn, err := archive.Pool.Acquire(ctx)
	if err != nil {
		return copyLimit{}, err
	}
	defer conn.Release()
	pg := conn.Conn().PgConn()
	if _, err := pg.CopyTo(ctx, f, `COPY (SELECT * FROM expiryctl.dead_letters ORDER BY id) TO STDOUT (FORMAT binary)`); err != nil {
		return copyLimit{}, fmt.Errorf("export the subject's rows: %w", err)
	}
	if err := f.Sync(); err != nil {
		return copyLimit{}, err
	}
	// LIKE copies columns, defaults, CHECK and NOT NULL constraints, the
	// primary key, the unique fingerprint and every other index, and each
	// column's storage and compression; never triggers. The identity is
	// left out, so that the rows keep their ids.
	const table = "expiryctl_bench_copy_limit"
	if _, err := conn.Exec(ctx, `CREATE TABLE `+table+` (LIKE expiryctl.dead_letters
		INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING INDEXES INCLUDING STORAGE INCLUDING COMPRESSION)`); err != nil {
		return copyLimit{}, fmt.Errorf("create the limit's table: %w", err)
	}

	lim := copyLimit{how: "server-side COPY from a file"}
	mon := startCPU()
	start := time.Now()
	_, err = conn.Exec(ctx, `COPY `+table+` FROM `+quoteLiteral(f.Name())+` (FORMAT binary)`)
	if err != nil {
		// Nothing of a failed COPY is stored: the same rows over the
		// connection instead.
		serverErr := err
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return copyLimit{}, err
		}
		lim.how = fmt.Sprintf("COPY FROM STDIN, as the server could not read the file (%v)", serverErr)
		start = time.Now()
		_, err = pg.CopyFrom(ctx, f, `COPY `+table+` FROM STDIN (FORMAT binary)`)
	}
	lim.wall = time.Since(start)
	lim.cpu = mon.Stop()
	if err != nil {
		return copyLimit{}, fmt.Errorf("copy the rows: %w", err)
	}
	var got int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+table).Scan(&got); err != nil {
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
