package kubernetes

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/astrabox/astrabox/sandbox"
)

// TestPodStillStarting: while execd is silent, a Pod that is gone, was
// replaced, failed or is being deleted ends the wait with the cluster's
// reason; a running Pod, or an API server that does not answer just now,
// lets it go on.
func TestPodStillStarting(t *testing.T) {
	now := metav1.Now()
	running := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: boxContainer,
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}
	for _, tt := range []struct {
		name   string
		status int         // of the API server's answer
		pod    *corev1.Pod // the answer's body when status is 200
		code   sandbox.Code
		want   string // in the error; "" for none
	}{
		{name: "running", status: http.StatusOK, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"}, Status: running}},
		{name: "api unavailable", status: http.StatusServiceUnavailable},
		{name: "gone", status: http.StatusNotFound, want: "deleted while starting"},
		{name: "replaced", status: http.StatusOK, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u2"}, Status: running}, want: "deleted while starting"},
		{name: "evicted", status: http.StatusOK, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1"},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, Reason: "Evicted", Message: "low on ephemeral storage"}},
			code: sandbox.CodeRuntime, want: "pod Failed (Evicted): low on ephemeral storage"},
		{name: "deleting", status: http.StatusOK, pod: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: "u1", DeletionTimestamp: &now}, Status: running},
			code: sandbox.CodeRuntime, want: "being deleted"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/api/v1/namespaces/ns/pods/abx-box" {
					http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
					return
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(tt.status)
				body := any(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
					Code: int32(tt.status), Reason: metav1.StatusReason(http.StatusText(tt.status))})
				if tt.status == http.StatusNotFound {
					body = metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure,
						Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound}
				}
				if tt.pod != nil {
					pod := *tt.pod
					pod.TypeMeta = metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"}
					pod.Name, pod.Namespace = "abx-box", "ns"
					body = pod
				}
				_ = json.NewEncoder(w).Encode(body)
			}))
			defer srv.Close()
			p, err := New(Config{ExecdImage: "execd", Namespace: "ns", rest: &rest.Config{Host: srv.URL}})
			if err != nil {
				t.Fatal(err)
			}
			err = p.podStillStarting(context.Background(), "box", boxState{Pod: "abx-box", UID: "u1"})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("podStillStarting: %v, want nil", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("podStillStarting: %v, want an error with %q", err, tt.want)
			case tt.code != "" && sandbox.CodeOf(err) != tt.code:
				t.Fatalf("podStillStarting: code %s, want %s", sandbox.CodeOf(err), tt.code)
			}
		})
	}
}
