package live

import (
	"errors"
	"fmt"

	"github.com/backoff-audit/audit/server"
)

// checkRanges refuses a flag of the sniffing sessions outside its range,
// naming it: a negative --idle or cap is no default.
func (c Config) checkRanges() error {
	var errs []error
	if c.Idle < 0 {
		errs = append(errs, fmt.Errorf("--idle %v: must not be negative (0: twice the max backoff plus the tolerance)", c.Idle))
	}
	if err := server.CheckMS("--max_reconnect_backoff_ms", int64(c.MaxMS), 0); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
