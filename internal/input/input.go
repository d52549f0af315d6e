// Package input reads the files a user names on the command line (a saved result, a
// config file) so that no name can hang symmem or exhaust its memory: os.ReadFile of a
// named pipe that nobody writes waits forever, and of /dev/zero never ends.
package input

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/symmem/symmem/internal/units"
)

// Read returns the contents of file, at most limit bytes. A directory, a device or a
// socket is refused, and so is a file holding more than limit bytes; a named pipe is
// read (`--config <(...)` is one), but one that nobody writes to reads as empty instead
// of waiting for a writer. A file that cannot be found or opened gives the
// *fs.PathError of os.Stat or os.Open; every other refusal names file and what it is,
// for the caller to add what to give instead.
func Read(file string, limit int64) ([]byte, error) {
	st, err := os.Stat(file)
	if err != nil {
		return nil, err
	}
	switch m := st.Mode(); {
	case m.IsDir():
		return nil, fmt.Errorf("%s is a directory, not a file", file)
	case m&fs.ModeDevice != 0:
		return nil, fmt.Errorf("%s is a device, not a file", file)
	case m&fs.ModeSocket != 0:
		return nil, fmt.Errorf("%s is a socket, not a file", file)
	case m.IsRegular() && st.Size() > limit:
		return nil, tooLarge(file, limit)
	}
	// O_NONBLOCK: opening a named pipe for reading otherwise waits for a writer. Reads
	// still wait for data while a writer holds the pipe open (Go's poller), and end at
	// once when none does.
	f, err := os.OpenFile(file, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, tooLarge(file, limit)
	}
	return b, nil
}

func tooLarge(file string, limit int64) error {
	return fmt.Errorf("%s holds more than %s", file, units.FormatSize(limit))
}
