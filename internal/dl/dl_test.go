package dl

import (
	"fmt"
	"strings"
	"sync"
	"testing"
)

// A library that cannot be opened must always come with the loader's reason, and its
// own: dlerror is per thread, and reading it after the goroutine moved thread gave an
// empty reason (2 of 20 `--backend auto` runs) or another library's.
func TestOpenMissingAlwaysSaysWhy(t *testing.T) {
	const workers, each = 16, 200
	var wg sync.WaitGroup
	errs := make(chan string, workers*each)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := 0; i < each; i++ {
				name := fmt.Sprintf("libsymmem-missing-%d-%d.so.1", w, i)
				_, err := Open(name)
				if err == nil {
					errs <- name + " opened"
					continue
				}
				// glibc: "dlopen NAME: NAME: cannot open shared object file: ..."
				msg := err.Error()
				if _, reason, _ := strings.Cut(msg, ": "); !strings.Contains(reason, name) {
					errs <- msg
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	var bad []string
	for e := range errs {
		bad = append(bad, e)
	}
	if len(bad) > 0 {
		t.Errorf("%d of %d failed opens lacked their own reason, e.g. %q", len(bad), workers*each, bad[0])
	}
}
