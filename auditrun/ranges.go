package auditrun

import (
	"errors"

	"github.com/backoff-audit/audit/internal/field"
	"github.com/backoff-audit/audit/server"
)

// checkRanges refuses a field of the sniffing sessions outside its range,
// naming it: a negative Idle or cap is no default.
func (c Config) checkRanges() error {
	var errs []error
	if c.Idle < 0 {
		errs = append(errs, field.Errorf("Idle", c.Idle, "must not be negative (0: twice the max backoff plus the tolerance)"))
	}
	if err := server.CheckMS("MaxMS", int64(c.MaxMS), 0); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}
