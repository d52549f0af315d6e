package cli

import (
	"errors"
	"strings"

	"github.com/symmem/symmem/internal/setting"
	"github.com/symmem/symmem/pkg/kernels"
	"github.com/symmem/symmem/pkg/launch"
)

// The layers below the CLI mark the settings they name ({heap-size}); the CLI's words
// for them are its flags.
func init() { setting.Use(flagOf) }

// flagOf is the flag that sets n.
func flagOf(n setting.Name) string { return "--" + string(n) }

// libraryWords names symmem's flags in the remedies of errors from the pkg/ libraries,
// which speak of their settings in their own terms ("raise the timeout"): the CLI is
// the one layer that knows the flags. The library's words are replaced inside the whole
// message, since the layers between may have wrapped the error with fmt.Errorf, which
// keeps a copy of its text; the result still unwraps to err.
func libraryWords(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	reword := func(plain, flagged string) { msg = strings.Replace(msg, plain, flagged, 1) }
	var le *launch.ListenError
	if errors.As(err, &le) && le.Setting == "" {
		c := *le
		c.Setting = "--store-addr"
		reword(le.Error(), c.Error())
	}
	var te *launch.TimeoutError
	if errors.As(err, &te) && te.Setting == "" {
		c := *te
		c.Setting = "--timeout"
		reword(te.Error(), c.Error())
	}
	var we *kernels.WarpsError
	if errors.As(err, &we) && we.Setting == "" {
		c := *we
		c.Setting = "--warps"
		reword(we.Error(), c.Error())
	}
	if msg == err.Error() {
		return err
	}
	return &worded{msg, err}
}

// worded is an error with a message of the CLI's own.
type worded struct {
	msg string
	err error
}

func (w *worded) Error() string { return w.msg }
func (w *worded) Unwrap() error { return w.err }
