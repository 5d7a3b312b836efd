package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/astrabox/astrabox/store"
)

func strp(s string) *string { return &s }

// testExecutions covers the execution history: append, get, list newest
// first with filters and paging, annotate, and that a sandbox's history
// goes with its record.
func testExecutions(t *testing.T, s store.Store) {
	ctx := context.Background()
	for _, id := range []string{"sb-a", "sb-b"} {
		if err := s.CreateSandbox(ctx, newSandbox(id)); err != nil {
			t.Fatal(err)
		}
	}
	var seqs []int64
	for i := range 5 {
		e := &store.Execution{ID: fmt.Sprintf("exe-%d", i), SandboxID: "sb-a", Type: []string{"shell", "python"}[i%2],
			Code: fmt.Sprintf("echo %d", i), Success: i != 3, ExecutionTimeMs: int64(i), Output: "out\u2603",
			CreatedAt: at(time.Duration(i) * time.Second)}
		if i == 3 {
			e.Error = strp("boom")
		}
		if err := s.AppendExecution(ctx, e); err != nil {
			t.Fatal(err)
		}
		if len(seqs) > 0 && e.Seq <= seqs[len(seqs)-1] {
			t.Fatalf("seq %d after %d: not increasing", e.Seq, seqs[len(seqs)-1])
		}
		seqs = append(seqs, e.Seq)
	}
	if err := s.AppendExecution(ctx, &store.Execution{ID: "exe-b", SandboxID: "sb-b", Type: "shell"}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendExecution(ctx, &store.Execution{ID: "exe-0", SandboxID: "sb-a", Type: "shell"}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("append of an existing id: %v, want ErrConflict", err)
	}
	if err := s.AppendExecution(ctx, &store.Execution{ID: "exe-x", SandboxID: "missing", Type: "shell"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("append to a missing sandbox: %v, want ErrNotFound", err)
	}

	got, err := s.GetExecution(ctx, "sb-a", "exe-3")
	if err != nil {
		t.Fatal(err)
	}
	if got.Code != "echo 3" || got.Success || got.Error == nil || *got.Error != "boom" || got.Output != "out\u2603" ||
		got.Type != "python" || got.ExecutionTimeMs != 3 || got.Description != nil || got.Seq != seqs[3] {
		t.Fatalf("GetExecution = %+v", got)
	}
	checkTime(t, "CreatedAt", got.CreatedAt, at(3*time.Second))
	if _, err := s.GetExecution(ctx, "sb-b", "exe-3"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("get through another sandbox: %v, want ErrNotFound", err)
	}

	for _, tc := range []struct {
		name  string
		f     store.ExecutionFilter
		ids   []string
		total int
	}{
		{"all", store.ExecutionFilter{}, []string{"exe-4", "exe-3", "exe-2", "exe-1", "exe-0"}, 5},
		{"type", store.ExecutionFilter{Type: "python"}, []string{"exe-3", "exe-1"}, 2},
		{"success", store.ExecutionFilter{SuccessOnly: true}, []string{"exe-4", "exe-2", "exe-1", "exe-0"}, 4},
		{"page", store.ExecutionFilter{Limit: 2, Offset: 1}, []string{"exe-3", "exe-2"}, 5},
		{"past the end", store.ExecutionFilter{Offset: 9}, []string{}, 5},
	} {
		list, total, err := s.ListExecutions(ctx, "sb-a", tc.f)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		ids := []string{}
		for _, e := range list {
			ids = append(ids, e.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(tc.ids) || total != tc.total {
			t.Errorf("%s: ids %v total %d, want %v total %d", tc.name, ids, total, tc.ids, tc.total)
		}
	}

	if _, err := s.AnnotateExecution(ctx, "sb-a", "exe-2", store.ExecutionNotes{Description: strp("d"), Tags: strp("t1,t2")}); err != nil {
		t.Fatal(err)
	}
	a, err := s.AnnotateExecution(ctx, "sb-a", "exe-2", store.ExecutionNotes{Notes: strp("n")})
	if err != nil {
		t.Fatal(err)
	}
	if a.Description == nil || *a.Description != "d" || a.Tags == nil || *a.Tags != "t1,t2" || a.Notes == nil || *a.Notes != "n" {
		t.Fatalf("annotated = %+v", a)
	}
	if _, err := s.AnnotateExecution(ctx, "sb-a", "nope", store.ExecutionNotes{}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("annotate missing: %v, want ErrNotFound", err)
	}

	if err := s.DeleteSandbox(ctx, "sb-a"); err != nil {
		t.Fatal(err)
	}
	if list, total, err := s.ListExecutions(ctx, "sb-a", store.ExecutionFilter{}); err != nil || len(list) != 0 || total != 0 {
		t.Fatalf("history after the sandbox was deleted: %d entries, total %d, %v", len(list), total, err)
	}
	if _, total, _ := s.ListExecutions(ctx, "sb-b", store.ExecutionFilter{}); total != 1 {
		t.Fatalf("another sandbox's history: total %d, want 1", total)
	}
}
