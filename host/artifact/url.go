package artifact

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"

	"github.com/tinyhost/tinyhost/host/api"
)

// fetchURL is Fetch for a URL: the bytes must hash to src.SHA256, so a cached
// copy answers without the network whatever the URL.
func (c *Client) fetchURL(ctx context.Context, src api.Source) ([]byte, Meta, error) {
	u, err := url.Parse(src.URL)
	if err != nil {
		return nil, Meta{}, fmt.Errorf("%w: url: %v", api.ErrInvalidSource, err)
	}
	what := redact(src.URL)
	if u.Scheme == "http" && !plainAllowed(c.plain, u.Host) {
		return nil, Meta{}, fmt.Errorf("%w: %s: plain HTTP to %s: use https, or list the host in the plain-HTTP allowlist", api.ErrPlainHTTP, what, u.Host)
	}
	if b, ok := c.cache.blob(src.SHA256); ok {
		return b, Meta{Digest: src.SHA256, Size: int64(len(b)), FromCache: true}, nil
	}
	var b []byte
	err = c.retry(ctx, u.Host, "download "+what, func(ctx context.Context) (err error) {
		b, err = c.getURL(ctx, src.URL)
		return err
	})
	if err != nil {
		return nil, Meta{}, err
	}
	got := digestOf(b)
	if err := checkPin(src, what, got); err != nil {
		return nil, Meta{}, err
	}
	if err := checkWasm(what, b); err != nil {
		return nil, Meta{}, err
	}
	c.cache.putBlob(got, b)
	return b, Meta{Digest: got, Size: int64(len(b))}, nil
}

func (c *Client) getURL(ctx context.Context, rawURL string) ([]byte, error) {
	what := redact(rawURL)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, rawURL, nil)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", api.ErrInvalidSource, err)
	}
	hc := &http.Client{Transport: c.transport}
	resp, err := hc.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			ue.URL = redact(ue.URL)
		}
		return nil, fmt.Errorf("GET %s: %w", what, err)
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusNotFound:
		return nil, fmt.Errorf("%w: %w", api.ErrNotFound, &statusError{URL: what, Code: resp.StatusCode, Status: resp.Status})
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("%w: %w", api.ErrUnauthorized, &statusError{URL: what, Code: resp.StatusCode, Status: resp.Status})
	case resp.StatusCode != http.StatusOK:
		return nil, &statusError{URL: what, Code: resp.StatusCode, Status: resp.Status}
	}
	if resp.ContentLength > c.opts.MaxSize {
		return nil, fmt.Errorf("%w: %s is %d bytes, over the limit of %d bytes", api.ErrTooLarge, what, resp.ContentLength, c.opts.MaxSize)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.opts.MaxSize+1))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", what, err)
	}
	if int64(len(b)) > c.opts.MaxSize {
		return nil, fmt.Errorf("%w: %s is over the limit of %d bytes", api.ErrTooLarge, what, c.opts.MaxSize)
	}
	return b, nil
}
