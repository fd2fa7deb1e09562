//go:build !unix

package ends

import "time"

// ProcessCPU tells nothing outside Unix: the controller then goes by
// goodput alone.
func ProcessCPU() time.Duration { return 0 }
