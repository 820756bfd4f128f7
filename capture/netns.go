package capture

import (
	"fmt"

	"github.com/brokertrace/brokertrace/process"
)

// inNetNS runs fn in the network namespace at path ("" for the caller's;
// see process.InNetNS) and returns fn's error, or the namespace's with the
// package's prefix, as every error of this package has.
func inNetNS(path string, fn func() error) error {
	var ferr error
	if err := process.InNetNS(path, func() { ferr = fn() }); err != nil {
		return fmt.Errorf("capture: %w", err)
	}
	return ferr
}
