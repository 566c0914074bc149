package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/expiryctl/expiryctl/deadletter"
	"github.com/expiryctl/expiryctl/internal/service"
)

// DLQListOptions holds what `expiryctl dlq list` needs.
type DLQListOptions struct {
	IO      *IOStreams
	Archive func(context.Context) (service.Archive, error)
	Now     func() time.Time

	Reasons []string
	Status  string
	Since   string
	Until   string
	After   string
	Limit   int
	Output  *outputFormat
	Filter  deadletter.Filter
	Cursor  *deadletter.Cursor
}

// NewCmdDLQList builds `expiryctl dlq list`.
func NewCmdDLQList(f *Factory, runF func(context.Context, *DLQListOptions) error) *cobra.Command {
	opts := &DLQListOptions{IO: f.IO, Archive: f.Archive, Now: f.Now}
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List dead letters, newest first",
		Long: `List dead letters, newest first, a page at a time.

When more letters match than --limit, the token for the next page is printed
on stderr; pass it back with --after. --limit 0 streams every match with
bounded memory (use it with -o json or -o csv to export).

--request N lists the letters that died again after replay request N put
their jobs back on the queue (ingest links a letter to the request its
x-replay-request header names); ` + "`dlq summary`" + ` counts them per request.`,
		Example: `  expiryctl dlq list --reason transient-exhausted --since 2h
  expiryctl dlq list --search r-8421
  expiryctl dlq list --request 7      # letters back after replay request 7
  expiryctl dlq list --after MTc2NDUwODgwMDAwMDAwMDo0Mg
  expiryctl dlq list --limit 0 -o csv > letters.csv`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.resolve(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return dlqListRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringSliceVarP(&opts.Reasons, "reason", "r", nil, "only these reason categories (repeatable)")
	fl.StringVar(&opts.Filter.Queue, "queue", "", "only letters captured from this dead-letter queue")
	fl.StringVar(&opts.Status, "status", "", "only letters with this status: dead, in_request, replayed or discarded")
	fl.StringVar(&opts.Since, "since", "", "only letters dead-lettered at or after this time (RFC 3339, date, or duration ago)")
	fl.StringVar(&opts.Until, "until", "", "only letters dead-lettered before this time")
	fl.StringVarP(&opts.Filter.Search, "search", "s", "", "only letters whose ids, error class or error text contain this")
	fl.IntVarP(&opts.Limit, "limit", "n", 50, "letters per page; 0 streams them all")
	fl.StringVar(&opts.After, "after", "", "continue after this cursor (printed by the previous page)")
	fl.Int64Var(&opts.Filter.ReplayRequest, "request", 0, "only letters that died again after replay request N put them back on the queue")
	opts.Output = addOutputFlag(cmd, "table", "json", "csv")
	_ = cmd.RegisterFlagCompletionFunc("reason", cobra.FixedCompletions(categoryNames(), cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("status", cobra.FixedCompletions(statusNames(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func statusNames() []string {
	names := []string{}
	for _, s := range deadletter.Statuses() {
		names = append(names, string(s))
	}
	return names
}

// resolve turns the flag strings into the typed filter, so that every flag
// error is reported before any connection is made.
func (opts *DLQListOptions) resolve() error {
	for _, r := range opts.Reasons {
		c, err := deadletter.ParseCategory(r)
		if err != nil {
			return &FlagError{Err: err}
		}
		opts.Filter.Categories = append(opts.Filter.Categories, c)
	}
	if opts.Status != "" {
		s, err := deadletter.ParseStatus(opts.Status)
		if err != nil {
			return &FlagError{Err: err}
		}
		opts.Filter.Status = s
	}
	var err error
	if opts.Since != "" {
		if opts.Filter.Since, err = parseTimeFlag("since", opts.Since, opts.Now()); err != nil {
			return err
		}
	}
	if opts.Until != "" {
		if opts.Filter.Until, err = parseTimeFlag("until", opts.Until, opts.Now()); err != nil {
			return err
		}
	}
	if opts.Filter.ReplayRequest < 0 {
		return flagErrorf("invalid --request %d: use the id `expiryctl replay list` shows", opts.Filter.ReplayRequest)
	}
	if opts.Limit < 0 || opts.Limit > 10000 {
		return flagErrorf("invalid --limit %d: use 1 to 10000 for a page, or 0 to stream every match", opts.Limit)
	}
	if opts.After != "" {
		c, err := deadletter.ParseCursor(opts.After)
		if err != nil {
			return &FlagError{Err: err}
		}
		opts.Cursor = &c
	}
	return nil
}

// listTruncatable are the columns of dlq list that give up width on a
// narrow terminal: where a letter came from and its message id, never its
// id, status or reservation.
var listTruncatable = []string{"MESSAGE-ID", "QUEUE", "ERROR-CLASS"}

var listHeaders = []string{"ID", "DEAD-LETTERED", "CATEGORY", "ERROR-CLASS", "RESERVATION", "ATTEMPTS", "STATUS", "QUEUE", "MESSAGE-ID", "SYSTEM"}

func listCells(streams *IOStreams, r deadletter.Row, now time.Time) []string {
	return []string{strconv.FormatInt(r.ID, 10), formatTime(streams, r.DeadLetteredAt, now), string(r.Category),
		r.ErrorClass, r.ReservationID, strconv.Itoa(r.Attempts), string(r.Status), r.SourceQueue, r.MessageID, string(r.System.OrDefault())}
}

func dlqListRun(ctx context.Context, opts *DLQListOptions) error {
	archive, err := opts.Archive(ctx)
	if err != nil {
		return err
	}
	if opts.Limit == 0 {
		return streamList(ctx, archive, opts)
	}
	page, err := archive.List(ctx, opts.Filter, opts.Cursor, opts.Limit)
	if err != nil {
		return err
	}
	switch opts.Output.value {
	case "json":
		if err := writeJSON(opts.IO.Out, page.Rows); err != nil {
			return err
		}
	case "csv":
		w, err := newCSV(opts.IO.Out, csvHeaders...)
		if err != nil {
			return err
		}
		for _, r := range page.Rows {
			if err := w.row(csvCells(r)...); err != nil {
				return err
			}
		}
		if err := w.flush(); err != nil {
			return err
		}
	default:
		if len(page.Rows) == 0 {
			fmt.Fprintln(opts.IO.ErrOut, "no dead letters match")
			return nil
		}
		t := newTable(opts.IO, listHeaders...).truncatable(listTruncatable...).keepEnds("QUEUE", "MESSAGE-ID")
		for _, r := range page.Rows {
			t.addRow(listCells(opts.IO, r, opts.Now())...)
		}
		if err := t.render(); err != nil {
			return err
		}
	}
	if page.Next != nil {
		fmt.Fprintf(opts.IO.ErrOut, "next page: --after %s\n", page.Next)
	}
	return nil
}

var csvHeaders = []string{"id", "message_id", "reservation_id", "idempotency_key", "reason_category", "error_class",
	"attempts", "status", "source_queue", "dead_lettered_at", "due_at", "last_error", "system"}

func csvCells(r deadletter.Row) []string {
	due := ""
	if r.DueAt != nil {
		due = r.DueAt.Format(time.RFC3339Nano)
	}
	return []string{strconv.FormatInt(r.ID, 10), r.MessageID, r.ReservationID, r.IdempotencyKey, string(r.Category),
		r.ErrorClass, strconv.Itoa(r.Attempts), string(r.Status), r.SourceQueue, r.DeadLetteredAt.Format(time.RFC3339Nano), due, r.LastError,
		string(r.System.OrDefault())}
}

// streamList writes every match as it is read: a JSON array element by
// element, CSV row by row, or a table in chunks, never the whole result at once.
func streamList(ctx context.Context, archive service.Archive, opts *DLQListOptions) error {
	// One write per row would make the kernel, not the query, the cost of a
	// large export.
	buffered := bufio.NewWriterSize(opts.IO.Out, 64<<10)
	if err := streamListTo(ctx, archive, opts, buffered); err != nil {
		_ = buffered.Flush()
		return err
	}
	return buffered.Flush()
}

func streamListTo(ctx context.Context, archive service.Archive, opts *DLQListOptions, out io.Writer) error {
	switch opts.Output.value {
	case "json":
		first := true
		if _, err := fmt.Fprint(out, "["); err != nil {
			return err
		}
		err := archive.Stream(ctx, opts.Filter, opts.Cursor, func(r deadletter.Row) error {
			b, err := json.Marshal(r)
			if err != nil {
				return err
			}
			sep := ",\n"
			if first {
				sep, first = "\n", false
			}
			_, err = fmt.Fprint(out, sep, string(b))
			return err
		})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintln(out, "\n]")
		return err
	case "csv":
		w, err := newCSV(out, csvHeaders...)
		if err != nil {
			return err
		}
		n := 0
		err = archive.Stream(ctx, opts.Filter, opts.Cursor, func(r deadletter.Row) error {
			n++
			if n%1000 == 0 {
				if err := w.flush(); err != nil {
					return err
				}
			}
			return w.row(csvCells(r)...)
		})
		if err != nil {
			return err
		}
		return w.flush()
	default:
		streams := *opts.IO
		streams.Out = out
		t := newTable(&streams, listHeaders...).truncatable(listTruncatable...).keepEnds("QUEUE", "MESSAGE-ID")
		err := archive.Stream(ctx, opts.Filter, opts.Cursor, func(r deadletter.Row) error {
			t.addRow(listCells(opts.IO, r, opts.Now())...)
			if len(t.rows) >= 1000 {
				if err := t.render(); err != nil {
					return err
				}
				t.rows = t.rows[:0]
			}
			return nil
		})
		if err != nil {
			return err
		}
		return t.render()
	}
}
