package opensandbox

import (
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/astrabox/astrabox/api/wire"
	"github.com/astrabox/astrabox/sandbox"
)

func testProvider(t *testing.T, astrabox bool) *Provider {
	t.Helper()
	p, err := New(Config{Name: "edge", URL: "http://127.0.0.1:1", APIKey: "k", Owner: "o1", ProbeInterval: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	p.astrabox = astrabox
	return p
}

// TestRequest: how a Spec becomes the remote's create request.
func TestRequest(t *testing.T) {
	sixty := int64(60)
	ninety := int64(90)
	tests := []struct {
		name     string
		astrabox bool
		spec     sandbox.Spec
		want     wire.CreateSandboxRequest
		wantCode sandbox.Code
	}{
		{"opensandbox defaults", false, sandbox.Spec{Image: "debian:12"}, wire.CreateSandboxRequest{
			Image: &wire.ImageSpec{URI: "debian:12"}, Entrypoint: []string{"tail", "-f", "/dev/null"},
			Metadata: map[string]string{LabelOwner: "o1", LabelID: "b1"}, NetworkPolicy: &wire.NetworkPolicy{DefaultAction: "deny"}}, ""},
		{"astrabox limits, short timeout", true, sandbox.Spec{Image: "host", Timeout: 10 * time.Second, Metadata: map[string]string{"team": "a"},
			Resources: sandbox.Resources{MilliCPU: 500, MemoryBytes: 1 << 30, PIDs: 64, DiskBytes: 2 << 30}}, wire.CreateSandboxRequest{
			Image: &wire.ImageSpec{URI: "host"}, Timeout: &sixty,
			ResourceLimits: map[string]string{"cpu": "500m", "memory": "1073741824", "pids": "64", "ephemeral-storage": "2147483648"},
			Metadata:       map[string]string{"team": "a", LabelOwner: "o1", LabelID: "b1"}, NetworkPolicy: &wire.NetworkPolicy{DefaultAction: "deny"},
			Extensions: map[string]string{"network": "none"}}, ""},
		{"opensandbox drops pids and disk, rounds up", false, sandbox.Spec{Image: "x", Entrypoint: []string{"sleep", "1"}, Timeout: 89500 * time.Millisecond,
			Resources: sandbox.Resources{PIDs: 64, DiskBytes: 1 << 30}, Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkLimited, Allow: []string{"pypi.org"}}},
			wire.CreateSandboxRequest{Image: &wire.ImageSpec{URI: "x"}, Entrypoint: []string{"sleep", "1"}, Timeout: &ninety,
				Metadata:      map[string]string{LabelOwner: "o1", LabelID: "b1"},
				NetworkPolicy: &wire.NetworkPolicy{DefaultAction: "deny", Egress: []wire.NetworkRule{{Action: "allow", Target: "pypi.org"}}}}, ""},
		{"unrestricted", true, sandbox.Spec{Image: "x", Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}}, wire.CreateSandboxRequest{
			Image: &wire.ImageSpec{URI: "x"}, Metadata: map[string]string{LabelOwner: "o1", LabelID: "b1"},
			NetworkPolicy: &wire.NetworkPolicy{DefaultAction: "allow"}}, ""},
		{"workspace refused", true, sandbox.Spec{Image: "x", Workspace: &sandbox.Workspace{Volume: "v"}}, wire.CreateSandboxRequest{}, sandbox.CodeCapability},
		{"runtime refused", true, sandbox.Spec{Image: "x", Runtime: "runsc"}, wire.CreateSandboxRequest{}, sandbox.CodeCapability},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := testProvider(t, tc.astrabox).request("b1", tc.spec)
			if tc.wantCode != "" {
				if sandbox.CodeOf(err) != tc.wantCode {
					t.Fatalf("err %v, want %s", err, tc.wantCode)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("request = %+v, %v\nwant      %+v", got, err, tc.want)
			}
		})
	}
}

// TestRemoteErrors: the remote's error answers on the contract.
func TestRemoteErrors(t *testing.T) {
	p := testProvider(t, true)
	tests := []struct {
		status   int
		code     string
		wantCode sandbox.Code
		notFound bool
	}{
		{http.StatusNotFound, "SANDBOX_NOT_FOUND", sandbox.CodeSandboxNotFound, true},
		{http.StatusNotFound, "IMAGE_NOT_FOUND", sandbox.CodeImageNotFound, false},
		{http.StatusBadRequest, "CAPABILITY_NOT_SUPPORTED", sandbox.CodeCapability, false},
		{http.StatusBadRequest, "SOMETHING_ELSE", sandbox.CodeInvalidRequest, false},
		{http.StatusUnauthorized, "UNAUTHORIZED", sandbox.CodeUnavailable, false},
		{http.StatusConflict, "CONFLICT", sandbox.CodeConflict, false},
		{http.StatusBadGateway, "", sandbox.CodeUnavailable, false},
	}
	for _, tc := range tests {
		err := p.asSandboxError(&remoteError{remote: "edge", status: tc.status, code: tc.code, message: "m"})
		if sandbox.CodeOf(err) != tc.wantCode || errors.Is(err, sandbox.ErrNotFound) != tc.notFound {
			t.Errorf("%d %s: %v (code %s), want %s", tc.status, tc.code, err, sandbox.CodeOf(err), tc.wantCode)
		}
		if m := sandbox.MessageOf(err); tc.status != http.StatusNotFound && tc.status != http.StatusBadGateway && !strings.Contains(m, "edge") {
			t.Errorf("%d: message %q does not name the remote", tc.status, m)
		}
	}
}

// TestLearnRefusal: a capability the remote refused is no longer offered.
func TestLearnRefusal(t *testing.T) {
	p := testProvider(t, true)
	if !p.Capabilities().Has(sandbox.CapNetworkUnrestricted) {
		t.Fatal("unrestricted is not offered to begin with")
	}
	err := p.asSandboxError(&remoteError{remote: "edge", status: 400, code: "CAPABILITY_NOT_SUPPORTED",
		message: "capability network-unrestricted is not supported by this backend"})
	p.learn(sandbox.Spec{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}}, err)
	c := p.Capabilities()
	if c.Has(sandbox.CapNetworkUnrestricted) || !c.Has(sandbox.CapNetworkLimited) {
		t.Fatalf("after the refusal: %+v", c)
	}
	if err := c.Check(sandbox.Spec{Network: sandbox.NetworkPolicy{Mode: sandbox.NetworkUnrestricted}}); sandbox.CodeOf(err) != sandbox.CodeCapability {
		t.Fatalf("check after the refusal: %v", err)
	}
}
