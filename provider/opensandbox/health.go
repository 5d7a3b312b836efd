package opensandbox

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

// probeTimeout bounds one probe of the remote.
const probeTimeout = 5 * time.Second

// Health implements sandbox.Provider: the remote's /health must answer 200
// and its lifecycle API must accept the API key; the first successful
// probe also asks whether the remote is an AstraBox (GET /v1/profiles, an
// AstraBox addition), which widens Capabilities. Every probe's outcome is
// kept for Create (see ready).
func (p *Provider) Health(ctx context.Context) sandbox.Health {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	h := p.probe(ctx)
	p.record(h)
	return h
}

// probe asks the remote once.
func (p *Provider) probe(ctx context.Context) sandbox.Health {
	u := *p.base
	u.Path = strings.TrimRight(u.Path, "/") + "/health"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: err.Error()}
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: fmt.Sprintf("remote %s (%s) is unreachable: %s", p.cfg.Name, p.base.Host, scrub(err))}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: fmt.Sprintf("remote %s: /health answered HTTP %d", p.cfg.Name, resp.StatusCode)}
	}
	q := p.labelFilter("")
	q.Set("pageSize", "1")
	if err := p.call(ctx, http.MethodGet, "/sandboxes", q, nil, nil, nil); err != nil {
		return sandbox.Health{Status: sandbox.Unhealthy, Reason: sandbox.MessageOf(err)}
	}
	p.mu.Lock()
	known := p.astrabox
	p.mu.Unlock()
	if !known {
		if err := p.call(ctx, http.MethodGet, "/profiles", nil, nil, nil, nil); err == nil {
			p.mu.Lock()
			p.astrabox = true
			p.mu.Unlock()
		}
	}
	return sandbox.Health{Status: sandbox.Healthy}
}

// record keeps h as the latest probe outcome and logs a change.
func (p *Provider) record(h sandbox.Health) {
	p.mu.Lock()
	prev := p.health
	p.health, p.checked = h, time.Now()
	p.mu.Unlock()
	if prev.Status != h.Status {
		if h.Status == sandbox.Healthy {
			p.log.Info("remote backend is healthy", "backend", p.cfg.Name, "url", p.base.String())
		} else {
			p.log.Warn("remote backend is unhealthy", "backend", p.cfg.Name, "url", p.base.String(), "reason", h.Reason)
		}
	}
}

// ready is the remote's health as Create needs it: the latest probe's when
// it was healthy, otherwise a fresh probe (so a remote that came back is
// used at once, and one that is down is refused without waiting for a
// create to time out).
func (p *Provider) ready(ctx context.Context) sandbox.Health {
	p.mu.Lock()
	h := p.health
	p.mu.Unlock()
	if h.Status == sandbox.Healthy {
		return h
	}
	return p.Health(ctx)
}

// probeLoop probes the remote every ProbeInterval until ctx ends.
func (p *Provider) probeLoop(ctx context.Context) {
	defer close(p.stopped)
	if p.cfg.ProbeInterval < 0 {
		return
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p.Health(ctx)
		t.Reset(p.cfg.ProbeInterval)
	}
}
