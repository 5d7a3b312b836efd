package sandboxtest

import "testing"

func testFiles(t *testing.T, h Harness) { t.Skip("not yet written") }
