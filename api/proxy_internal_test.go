package api

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/sandbox"
)

func TestParseExpires(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	tests := []struct {
		in   string
		want time.Time // zero: refused
	}{
		// A lifetime in seconds (AstraBox's form).
		{"1", now.Add(time.Second)},
		{"3600", now.Add(time.Hour)},
		{"604800", now.Add(7 * 24 * time.Hour)},
		// Unix epoch seconds (the specification's form, what the SDKs'
		// getSignedEndpoint sends).
		{"1800003600", time.Unix(1_800_003_600, 0)},
		{"1800604800", time.Unix(1_800_604_800, 0)},
		// Refused: not in the future, more than 7 days ahead, not a count.
		{"1800000000", time.Time{}},
		{"1799999999", time.Time{}},
		{"604801", time.Time{}},
		{"1800604801", time.Time{}},
		{"0", time.Time{}},
		{"-5", time.Time{}},
		{"soon", time.Time{}},
		{"18446744073709551615", time.Time{}},
	}
	for _, tt := range tests {
		got, err := parseExpires(tt.in, now)
		if tt.want.IsZero() {
			if sandbox.CodeOf(err) != sandbox.CodeInvalidRequest {
				t.Errorf("parseExpires(%q) = %v, %v; want %s", tt.in, got, err, sandbox.CodeInvalidRequest)
			}
			continue
		}
		if err != nil || !got.Equal(tt.want) {
			t.Errorf("parseExpires(%q) = %v, %v; want %v", tt.in, got, err, tt.want)
		}
	}
}

func TestParseEndpointDomain(t *testing.T) {
	tests := []struct {
		in, host, port string
		ok             bool
	}{
		{"box.example.com", "box.example.com", "", true},
		{"Box.Example.COM.", "box.example.com", "", true},
		{"box.localhost:8080", "box.localhost", "8080", true},
		{"localhost", "localhost", "", true},
		{"a-1.example", "a-1.example", "", true},
		{"", "", "", false},
		{"https://box.example.com", "", "", false},
		{"box.example.com/path", "", "", false},
		{"*.box.example.com", "", "", false},
		{"box..example.com", "", "", false},
		{"-box.example.com", "", "", false},
		{"box_1.example.com", "", "", false},
		{"box.example.com:0", "", "", false},
		{"box.example.com:99999", "", "", false},
		{"box.example.com:http", "", "", false},
		{"10.0.0.1", "", "", false},
		{"[::1]:8080", "", "", false},
		{strings.Repeat("a", 64) + ".example", "", "", false},
	}
	for _, tt := range tests {
		host, port, err := ParseEndpointDomain(tt.in)
		if tt.ok != (err == nil) || host != tt.host || port != tt.port {
			t.Errorf("ParseEndpointDomain(%q) = %q, %q, %v; want %q, %q, ok %v", tt.in, host, port, err, tt.host, tt.port, tt.ok)
		}
	}
}

func TestProxyConfineHeaders(t *testing.T) {
	tests := []struct {
		name     string
		origin   boxOrigin
		in, want http.Header
	}{
		{"shared: origin-wide headers go, the sandbox policy comes", sharedOrigin,
			http.Header{"Set-Cookie": {"a=1"}, "Service-Worker-Allowed": {"/"}, "Clear-Site-Data": {`"cookies"`},
				"Content-Type": {"text/html"}, "Content-Security-Policy": {"img-src *"}},
			http.Header{"Content-Type": {"text/html"}, "Content-Security-Policy": {"img-src *", sharedOriginSandbox}}},
		{"shared: only service worker links go", sharedOrigin,
			http.Header{"Link": {`</a.css>; rel=preload`, `</sw.js>; rel="ServiceWorker"`, `</b.js>; rel=modulepreload`}},
			http.Header{"Link": {`</a.css>; rel=preload`, `</b.js>; rel=modulepreload`}, "Content-Security-Policy": {sharedOriginSandbox}}},
		{"endpoint: host-only cookies stay", endpointOrigin,
			http.Header{"Set-Cookie": {"a=1; Path=/; HttpOnly", "b=2; Domain=example.com", "c=3;domain=", "d=4; Path=/domain"},
				"Service-Worker-Allowed": {"/"}},
			http.Header{"Set-Cookie": {"a=1; Path=/; HttpOnly", "d=4; Path=/domain"}, "Service-Worker-Allowed": {"/"}}},
		{"endpoint: nothing to do", endpointOrigin,
			http.Header{"Content-Type": {"text/plain"}}, http.Header{"Content-Type": {"text/plain"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := tt.in.Clone()
			if tt.origin == sharedOrigin {
				confineShared(h)
			} else {
				confineEndpoint(h)
			}
			if !reflect.DeepEqual(h, tt.want) {
				t.Errorf("got %v, want %v", h, tt.want)
			}
		})
	}
}

func TestEndpointCookieNotForwarded(t *testing.T) {
	tests := []struct{ in, want string }{
		{"astrabox_endpoint_token=x", ""},
		{"a=1; astrabox_endpoint_token=x; b=2", "a=1; b=2"},
		{"a=1;astrabox_endpoint_token=x", "a=1"},
		{"astrabox_endpoint_token_2=x; a=1", "astrabox_endpoint_token_2=x; a=1"},
		{"a=1; b=two words", "a=1; b=two words"},
	}
	for _, tt := range tests {
		if got := withoutCookie(tt.in, endpointCookie); got != tt.want {
			t.Errorf("withoutCookie(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
