package platform

import "time"

func testTime(ms int64) time.Time { return time.UnixMilli(1_800_000_000_000 + ms) }
