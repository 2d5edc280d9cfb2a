package artifact

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/tinyhost/tinyhost/host/api"
)

// retry runs op until it succeeds, fails for good, or the attempts or the
// retry time of Options run out; then it returns an *UnreachableError naming
// host. Each retry is logged with the attempt, the wait and the error.
func (c *Client) retry(ctx context.Context, host, what string, op func(ctx context.Context) error) error {
	start := time.Now()
	wait := c.opts.Backoff
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s %s: %w (last error: %v)", what, host, context.Cause(ctx), err)
		}
		if !transient(err) {
			return err
		}
		elapsed := time.Since(start)
		// ±20% jitter keeps hosts that restart together from retrying in step.
		d := time.Duration(float64(wait) * (0.8 + 0.4*rand.Float64()))
		if attempt >= c.opts.Attempts || elapsed+d > c.opts.RetryTimeout {
			return &UnreachableError{Op: what, Host: host, Attempts: attempt, Elapsed: elapsed, Err: err}
		}
		c.log.Warn("retrying", "op", what, "host", host, "attempt", attempt, "attempts", c.opts.Attempts,
			"wait", d.Round(time.Millisecond), "error", err)
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s %s: %w (last error: %v)", what, host, context.Cause(ctx), err)
		case <-t.C:
		}
		wait = min(2*wait, c.opts.MaxBackoff)
	}
}

// transient says whether err may pass when tried again: the network failed
// (refused, reset, timed out, name not resolved) or the server answered 408,
// 429 or 5xx. A certificate error, a refusal, a bad artifact or a digest
// mismatch will not pass by trying again.
func transient(err error) bool {
	var (
		te   *transport.Error
		se   *statusError
		ne   net.Error
		dnse *net.DNSError
		ope  *net.OpError
		cve  *tls.CertificateVerificationError
		uae  x509.UnknownAuthorityError
		hne  x509.HostnameError
	)
	switch {
	case errors.Is(err, api.ErrForbiddenAddress):
		return false
	case errors.As(err, &cve), errors.As(err, &uae), errors.As(err, &hne):
		return false
	case errors.As(err, &te):
		return temporaryStatus(te.StatusCode)
	case errors.As(err, &se):
		return temporaryStatus(se.Code)
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ECONNABORTED),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, api.ErrStalled):
		return true
	case errors.As(err, &dnse), errors.As(err, &ope):
		return true
	case errors.As(err, &ne):
		return ne.Timeout()
	}
	return false
}

func temporaryStatus(code int) bool {
	return code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500
}

// statusError is an HTTP answer other than 200 from a web server.
type statusError struct {
	URL    string
	Code   int
	Status string
}

func (e *statusError) Error() string { return fmt.Sprintf("GET %s: %s", e.URL, e.Status) }
