package deadletter

import (
	"regexp"
	"strings"
)

// errorClassOfText is the error class a letter's last error text names,
// for a letter whose headers name none: a job store keeps only the text
// (its jobs' errors, a failed reason, a table's error column),
// and a worker that wrote no x-error-class often began its text with one.
// In order:
//
//  1. a leading snake_case word and a colon, after an optional
//     JavaScript error name ("db_timeout: …", "Error: db_timeout: …"),
//     unless the word says only that something failed ("error: …");
//  2. a PostgreSQL SQLSTATE, as the condition's name PostgreSQL gives it
//     ("… (SQLSTATE 40P01)" is deadlock_detected), or sqlstate_CODE for a
//     code without a name here;
//  3. a Node.js system error code ("connect ECONNREFUSED …" is
//     econnrefused);
//  4. otherwise none: a class is not guessed from prose.
//
// The classes then meet the Classifier's rules as any class does.
func errorClassOfText(text string) string {
	if m := leadingClass.FindStringSubmatch(text); m != nil && !genericWords[m[1]] {
		return m[1]
	}
	if m := sqlState.FindStringSubmatch(text); m != nil {
		if name, ok := sqlStateNames[m[1]]; ok {
			return name
		}
		return "sqlstate_" + strings.ToLower(m[1])
	}
	if m := nodeErrorCode.FindStringSubmatch(text); m != nil {
		return strings.ToLower(m[1])
	}
	return ""
}

var (
	leadingClass  = regexp.MustCompile(`^\s*(?:(?:[A-Z][A-Za-z]*)?Error: )?([a-z][a-z0-9]*(?:_[a-z0-9]+)+|[a-z]{3,}):\s`)
	sqlState      = regexp.MustCompile(`\bSQLSTATE:? ?([0-9A-Z]{5})\b`)
	nodeErrorCode = regexp.MustCompile(`\b(E(?:TIMEDOUT|SOCKETTIMEDOUT|CONNREFUSED|CONNRESET|CONNABORTED|HOSTUNREACH|AI_AGAIN|PIPE|NOTFOUND))\b`)
)

// genericWords begin an error text without saying what failed.
var genericWords = map[string]bool{"error": true, "fatal": true, "panic": true, "warning": true, "exception": true, "failed": true, "failure": true}

// sqlStateNames are the PostgreSQL conditions a job most often dies of,
// by SQLSTATE, named as PostgreSQL's errcodes table names them.
var sqlStateNames = map[string]string{
	"40P01": "deadlock_detected",
	"40001": "serialization_failure",
	"55P03": "lock_not_available",
	"57014": "query_canceled",
	"57P01": "admin_shutdown",
	"53300": "too_many_connections",
	"08000": "connection_exception",
	"08003": "connection_does_not_exist",
	"08006": "connection_failure",
	"23505": "unique_violation",
	"23503": "foreign_key_violation",
	"23502": "not_null_violation",
	"22P02": "invalid_text_representation",
	"42P01": "undefined_table",
}
