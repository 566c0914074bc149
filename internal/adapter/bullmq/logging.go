package bullmq

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// go-redis logs a failed dial or a dropped connection to stderr through a
// logger of its own, beside the error it returns: a command that reports
// the error would print the library's raw line too. The driver says
// everything through its errors.
func init() { redis.SetLogger(silent{}) }

type silent struct{}

func (silent) Printf(context.Context, string, ...any) {}
