package dsn

import (
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/expiryctl/expiryctl/internal/fixture/secrettest"
)

// fuzzShape is a connection string a user might type, built around a
// password.
type fuzzShape struct {
	name  string
	build func(password string) string
	// skip says which passwords the shape cannot hold unambiguously; nil
	// means none.
	skip func(password string) bool
	// escaped says the password is percent-encoded or quoted, so no parser
	// can misread where it ends and print a piece of it.
	escaped bool
}

var fuzzShapes = []fuzzShape{
	{name: "postgres", build: func(pw string) string { return "postgres://u:" + pw + "@127.0.0.1:1/db" }},
	{name: "postgresql", build: func(pw string) string { return "postgresql://u:" + pw + "@127.0.0.1:1/db?sslmode=disable" }},
	{name: "amqp", build: func(pw string) string { return "amqp://u:" + pw + "@127.0.0.1:1/" }},
	{name: "amqps", build: func(pw string) string { return "amqps://u:" + pw + "@127.0.0.1:1/vhost" }},
	{name: "multi-host", build: func(pw string) string { return "postgres://u:" + pw + "@127.0.0.1:1,127.0.0.2:2/db" }},
	{name: "no user", build: func(pw string) string { return "postgres://:" + pw + "@127.0.0.1:1/db" }},
	// "u://x@host" is a URL with scheme "u" and no password.
	{name: "no scheme", build: func(pw string) string { return "u:" + pw + "@127.0.0.1:1/db" },
		skip: func(pw string) bool { return strings.HasPrefix(pw, "//") }},
	{name: "encoded postgres", escaped: true, build: func(pw string) string {
		return "postgres://" + url.UserPassword("u", pw).String() + "@127.0.0.1:1/db"
	}},
	{name: "encoded amqps", escaped: true, build: func(pw string) string {
		return "amqps://" + url.UserPassword("u", pw).String() + "@127.0.0.1:1/"
	}},
	{name: "query", escaped: true, build: func(pw string) string {
		return "postgres://127.0.0.1:1/db?sslmode=disable&password=" + url.QueryEscape(pw)
	}},
	// A raw "&" starts another parameter, whatever the user meant.
	{name: "raw query", build: func(pw string) string { return "postgres://127.0.0.1:1/db?sslmode=disable&password=" + pw },
		skip: func(pw string) bool { return strings.Contains(pw, "&") }},
	{name: "key/value", escaped: true, build: func(pw string) string {
		return "host=127.0.0.1 port=1 user=u password='" + secrettest.KeyValueEscape(pw) + "' dbname=db"
	}},
}

// checkHidden fails when text, a message that may quote the connection
// string, shows pw: any of forms outside the masks, or for a password too
// short to be told from the rest of a message, the password where a URL or
// key/value string keeps it.
func checkHidden(t *testing.T, what, text, pw string, forms []string) {
	t.Helper()
	if len(pw) < minSecretLen {
		forms = []string{":" + pw + "@", "'" + pw + "'"}
	}
	for _, form := range forms {
		if secrettest.CountOutsideMasks(text, form) > 0 {
			t.Errorf("%s shows %q of password %q:\n%s", what, form, pw, text)
			return
		}
	}
}

// maxFuzzPassword is the longest password FuzzRedactHidesPassword tries.
const maxFuzzPassword = 256

// FuzzRedactHidesPassword types a fuzzed password into each shape of
// connection string and checks that no form of it survives Redact or Address,
// nor RedactTextFor over the errors pgxpool.ParseConfig and amqp.ParseURI
// return for the string (store and broker build their messages that way; their
// own tests run them whole).
func FuzzRedactHidesPassword(f *testing.F) {
	for _, pw := range []string{
		"S3cret", "S3cret PW", "pa@ssS3cretPW5", "pa@ss", "pa@ss/S3cret", "p%40ss%20w0rd", "S3cr%zzet",
		"S3cret/PW", "12/S3cretPW", "S3cret#PW", "S3cret?PW", "a?password=b", "S3cret&PW", "a,b:c@d",
		`it's "S3cret"`, `back\slash`, "pässwörd€", "\xff\xfeS3cret", "x://y", " lead", "trail ",
		"new\nline", "tab\tS3cret", "NUL\x00S3cret", "pw", "a b", ":@/?#%", "xxxxx", "password", "127.0.0.1",
		"#pass", `000,0"00000#`, "%0@0\xb6", "@0000000\n", "#  :#   #",
	} {
		f.Add(pw)
	}
	const placeholder = "Pl4ceholder"
	f.Fuzz(func(t *testing.T, pw string) {
		// Longer than any password a person types: such inputs add nothing
		// but make each run, and so the fuzzer's minimising, slow.
		if pw == "" || len(pw) > maxFuzzPassword {
			return
		}
		for _, sh := range fuzzShapes {
			if sh.skip != nil && sh.skip(pw) {
				continue
			}
			forms := secrettest.Forms(pw, !sh.escaped, minSecretLen)
			raw := sh.build(pw)

			// Redact masks the password whatever its length: it may show a form
			// of it only as often as it shows that form with a placeholder
			// password.
			got, skeleton := Redact(raw), Redact(sh.build(placeholder))
			for _, form := range secrettest.Forms(pw, !sh.escaped, 1) {
				if secrettest.CountOutsideMasks(got, form) > secrettest.CountOutsideMasks(skeleton, form) {
					t.Errorf("%s: Redact(%q) = %q shows %q", sh.name, raw, got, form)
					break
				}
			}
			checkHidden(t, sh.name+": Address", Address(raw), pw, forms)
			checkHidden(t, sh.name+": RedactTextFor(the URL)", RedactTextFor(raw, raw), pw, forms)

			if _, err := pgxpool.ParseConfig(raw); err != nil {
				checkHidden(t, sh.name+": pgxpool.ParseConfig error", RedactTextFor(err.Error(), raw), pw, forms)
			}
			if _, err := amqp.ParseURI(raw); err != nil {
				checkHidden(t, sh.name+": amqp.ParseURI error", RedactTextFor(err.Error(), raw), pw, forms)
			}
		}
	})
}
