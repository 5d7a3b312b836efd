package bench

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	l := summarize(ds)
	if l.N != 100 || l.Min != 1 || l.P50 != 50 || l.P90 != 90 || l.P99 != 99 || l.Max != 100 {
		t.Fatalf("%+v", l)
	}
	if (summarize(nil) != Latency{}) {
		t.Fatal("empty input")
	}
	one := summarize([]time.Duration{3 * time.Millisecond})
	if one.P50 != 3 || one.P99 != 3 {
		t.Fatalf("%+v", one)
	}
}

func TestWriteTable(t *testing.T) {
	var buf bytes.Buffer
	Report{Title: "T", Rows: []Row{{Scenario: "s", Unit: "MB/s", Subject: 2, Alternative: 4, AltName: "cp"}}}.WriteTable(&buf)
	if !strings.Contains(buf.String(), "0.50x") || !strings.Contains(buf.String(), "(cp)") {
		t.Fatal(buf.String())
	}
}
