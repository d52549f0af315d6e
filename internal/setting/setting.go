// Package setting lets the layers below symmem's command line and its library name a
// setting in what they say (an error's remedy: "raise the heap size") without knowing
// how a person sets it. A message names a setting by value, a Name among its operands
// (Errorf("%s %d out of range", setting.NProc, n)), and whoever presents the message
// words it with Words of its own: the command line names the flag (--nproc), the
// library the field of its options (JobOptions.NProc), the config file its key. Each
// setting's names are written once, in this package's table. Nothing is installed for
// the whole process: a layer that presents (prints a note, records a reason in a
// result) is handed the Words to use.
package setting

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
)

// Name is a setting's key: the config file's key, the command line's flag without its
// dashes ("heap-size", --heap-size) and, upper-cased after SYMMEM_ with dashes as
// underscores, its environment variable. Unworded (fmt's %s), it prints in braces,
// "{heap-size}": a message that shows one was never presented.
type Name string

// String is n unworded, in braces.
func (n Name) String() string { return "{" + string(n) + "}" }

// The settings the layers below the command line name, each a row of fields.
const (
	Algo       Name = "algo"
	Alpha      Name = "alpha"
	Arch       Name = "arch"
	Backend    Name = "backend"
	Bidir      Name = "bidir"
	Blocks     Name = "blocks"
	Check      Name = "check"
	Config     Name = "config"
	Const      Name = "const"
	Count      Name = "count"
	CSV        Name = "csv"
	DryRun     Name = "dry-run"
	DType      Name = "dtype"
	Experts    Name = "experts"
	Factor     Name = "factor"
	Format     Name = "format"
	Graph      Name = "graph"
	HeapSize   Name = "heap-size"
	Hidden     Name = "hidden"
	Impl       Name = "impl"
	ImplName   Name = "name" // kernels build's name for the implementation it builds
	Iters      Name = "iters"
	JSON       Name = "json"
	JSONFile   Name = "json-file"
	K          Name = "k"
	Kernel     Name = "kernel"
	Kernels    Name = "kernels"
	Launcher   Name = "launcher"
	M          Name = "m"
	Matrix     Name = "matrix"
	MaxSize    Name = "max-size"
	MinSize    Name = "min-size"
	N          Name = "n"
	NCCLLib    Name = "nccl-lib"
	NProc      Name = "nproc"
	NVSHMEMLib Name = "nvshmem-lib"
	Op         Name = "op"
	Out        Name = "out"
	Overlap    Name = "overlap"
	Pattern    Name = "pattern"
	Peer       Name = "peer"
	Plot       Name = "plot"
	Random     Name = "random"
	RedOp      Name = "redop"
	Reps       Name = "reps"
	Root       Name = "root"
	Runs       Name = "runs"
	Seed       Name = "seed"
	Sizes      Name = "sizes"
	Skew       Name = "skew"
	Smoke      Name = "smoke"
	StallLimit Name = "stall-limit"
	StoreAddr  Name = "store-addr"
	StoreIface Name = "store-iface"
	TagOutput  Name = "tag-output"
	Threshold  Name = "threshold"
	Timeout    Name = "timeout"
	Tolerance  Name = "tolerance"
	Tokens     Name = "tokens"
	TopK       Name = "topk"
	Tune       Name = "tune"
	Value      Name = "value"
	WaitLimit  Name = "wait-limit"
	Warmup     Name = "warmup"
	Warps      Name = "warps"
	Wide       Name = "wide"
)

// fields is the one table of settings: each one's key, and the field of the library's
// options or specs that sets it ("" for a setting of the command line alone). The flag
// is the key after two dashes and the config file's key is the key: the config file and
// the environment set the command line's flags (internal/config).
var fields = map[Name]string{
	NProc: "JobOptions.NProc", Backend: "JobOptions.Backend", Timeout: "JobOptions.Timeout", HeapSize: "JobOptions.HeapSize",
	StoreAddr: "JobOptions.StoreAddr", Launcher: "JobOptions.Launcher", StoreIface: "JobOptions.StoreIface",
	TagOutput: "JobOptions.TagOutput", NVSHMEMLib: "JobOptions.NVSHMEMLib", NCCLLib: "JobOptions.NCCLLib",
	WaitLimit: "JobOptions.WaitLimit", StallLimit: "JobOptions.StallLimit", Kernels: "JobOptions.KernelsDir",
	DryRun: "JobOptions.DryRun",

	Op: "RunSpec.Op", Pattern: "RunSpec.Pattern", DType: "RunSpec.DType", RedOp: "RunSpec.RedOp", Count: "RunSpec.Count",
	Value: "RunSpec.Value", Peer: "RunSpec.Peer", Impl: "RunSpec.Launch.Impl", Blocks: "RunSpec.Launch.Blocks",
	Warps: "RunSpec.Launch.Warps", Tokens: "RunSpec.MoE.Tokens", Hidden: "RunSpec.MoE.Hidden", TopK: "RunSpec.MoE.TopK",
	Experts: "RunSpec.MoE.Experts", Seed: "RunSpec.MoE.Seed", Skew: "RunSpec.MoE.Skew", M: "RunSpec.Matmul.M",
	N: "RunSpec.Matmul.N", K: "RunSpec.Matmul.K", Random: "RunSpec.Random",

	MinSize: "BenchSpec.MinSize", MaxSize: "BenchSpec.MaxSize", Factor: "BenchSpec.Factor", Iters: "BenchSpec.Iters",
	Warmup: "BenchSpec.Warmup", Reps: "BenchSpec.Reps", Overlap: "BenchSpec.Overlap", Graph: "BenchSpec.Graph",
	Bidir: "BenchSpec.Bidir", Matrix: "BenchSpec.Matrix", Tune: "BenchSpec.Tune", Algo: "BenchSpec.Algo", Root: "BenchSpec.Root",

	Alpha: "", Arch: "", Check: "", Config: "", Const: "", CSV: "", Format: "", ImplName: "", JSON: "", JSONFile: "", Kernel: "", Out: "", Plot: "",
	Runs: "", Sizes: "", Smoke: "", Threshold: "", Tolerance: "", Wide: "",
}

// Names lists every setting, sorted.
func Names() []Name { return slices.Sorted(maps.Keys(fields)) }

// Lookup is the setting whose key is key.
func Lookup(key string) (Name, bool) {
	_, ok := fields[Name(key)]
	return Name(key), ok
}

// Field is the field of the library's options or specs that sets n
// ("JobOptions.HeapSize"), "" for a setting of the command line alone.
func (n Name) Field() string { return fields[n] }

// Words names each setting as a program's users set it; nil names it by its key
// ("heap-size").
type Words func(Name) string

// Flags are the command line's words: --heap-size.
var Flags Words = func(n Name) string { return "--" + string(n) }

// Fields are the library's words: the field that sets a setting (JobOptions.HeapSize),
// or its key where no field does.
var Fields Words = func(n Name) string {
	if f := n.Field(); f != "" {
		return f
	}
	return string(n)
}

// Unworded names a setting as a message nobody presented does: in braces.
var Unworded Words = Name.String

// Word is n in w.
func (w Words) Word(n Name) string {
	if w == nil {
		return string(n)
	}
	return w(n)
}

// Sprintf is fmt.Sprintf with each Name among a worded by w and each error said by w
// (Words.Error); %w formats as %v.
func (w Words) Sprintf(format string, a ...any) string {
	return fmt.Sprintf(noWrap(format), w.operands(a)...)
}

// Fprintf is Sprintf written to out.
func (w Words) Fprintf(out io.Writer, format string, a ...any) (int, error) {
	return io.WriteString(out, w.Sprintf(format, a...))
}

// operands are a as Sprintf formats them.
func (w Words) operands(a []any) []any {
	out := make([]any, len(a))
	for i, v := range a {
		switch v := v.(type) {
		case Name:
			out[i] = w.Word(v)
		case Text:
			out[i] = v.Say(w)
		case error:
			out[i] = w.say(v)
		default:
			out[i] = v
		}
	}
	return out
}

// noWrap is format with each %w made %v, for fmt.Sprintf.
func noWrap(format string) string {
	if !strings.Contains(format, "%w") {
		return format
	}
	var b strings.Builder
	for i := 0; i < len(format); i++ {
		c := format[i]
		b.WriteByte(c)
		if c != '%' {
			continue
		}
		// Flags, width, precision and argument indexes, up to the verb.
		j := i + 1
		for j < len(format) && strings.IndexByte("+-# 0123456789.*[]", format[j]) >= 0 {
			j++
		}
		if j < len(format) {
			b.WriteString(format[i+1 : j])
			if format[j] == 'w' {
				b.WriteByte('v')
			} else {
				b.WriteByte(format[j])
			}
		}
		i = j
	}
	return b.String()
}

// Text is a phrase that names settings by value, for a message to take among its
// operands: Errorf("lower %s", Textf("%s or %s", MaxSize, Overlap)).
type Text struct {
	format string
	args   []any
}

// Textf is a Text: a format and its operands, as fmt.Sprintf takes them, the settings
// among them Names.
func Textf(format string, a ...any) Text { return Text{format, a} }

// String is t with its settings unworded.
func (t Text) String() string { return t.Say(Unworded) }

// Say is t with its settings worded by w.
func (t Text) Say(w Words) string { return w.Sprintf(t.format, t.args...) }

// Naming is err, whose message names the setting n by whatever name set gives the
// error that makes it (the Setting fields of pkg/launch's and pkg/kernels' errors take
// their caller's name for a setting): presented with Words, set is given n's word.
func Naming(err error, n Name, set func(string)) error {
	set(n.String())
	return &naming{err, n, set}
}

type naming struct {
	err error
	n   Name
	set func(string)
}

func (e *naming) Error() string { e.set(e.n.String()); return e.err.Error() }

// lead is the setting the message opens with: n, where it does.
func (e *naming) lead() (Name, bool) {
	if strings.HasPrefix(strings.TrimPrefix(e.Error(), "unknown "), e.n.String()) {
		return e.n, true
	}
	return "", false
}
func (e *naming) Unwrap() error { return e.err }
func (e *naming) Say(w Words) string {
	e.set(w.Word(e.n))
	defer e.set(e.n.String())
	return w.say(e.err)
}

// Opening is err, a message its maker worded with w, known to open with whichever of
// names it opens with as w words them (after "unknown "): for a package that takes its
// caller's names for settings (pkg/launch's DiscoverOptions.Name) and so says none by
// value, so that Lead finds it.
func Opening(err error, w Words, names ...Name) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimPrefix(err.Error(), "unknown ")
	for _, n := range names {
		if word := w.Word(n); strings.HasPrefix(msg, word+" ") || strings.HasPrefix(msg, word+":") {
			return &opening{err, n}
		}
	}
	return err
}

type opening struct {
	error
	n Name
}

func (e *opening) Unwrap() error      { return e.error }
func (e *opening) lead() (Name, bool) { return e.n, true }
func (e *opening) Say(w Words) string { return e.Error() }

// Error is a message that names settings by value: a format and its operands as
// fmt.Errorf takes them, the settings among the operands Names. Whoever presents it
// words them (Words.Error); its Error names them unworded, in braces. It wraps what
// fmt.Errorf would (the operands of %w).
type Error struct {
	format string
	args   []any
	wraps  []error
}

// Errorf is fmt.Errorf for a message that names settings: its operands may be Names.
func Errorf(format string, a ...any) error {
	e := &Error{format: format, args: a}
	switch w := fmt.Errorf(format, a...).(type) {
	case interface{ Unwrap() error }:
		e.wraps = []error{w.Unwrap()}
	case interface{ Unwrap() []error }:
		e.wraps = w.Unwrap()
	}
	return e
}

// Error is the message with its settings unworded.
func (e *Error) Error() string { return e.Say(Unworded) }

// Unwrap is what the message wraps (its %w operands).
func (e *Error) Unwrap() []error { return e.wraps }

// Say is the message with its settings worded by w.
func (e *Error) Say(w Words) string { return w.Sprintf(e.format, e.args...) }

// lead is the setting the message opens with: its first operand, a Name that nothing
// but "unknown " comes before, or the lead of its first operand, an error that opens
// the message.
func (e *Error) lead() (Name, bool) {
	i := strings.IndexByte(e.format, '%')
	if i < 0 || len(e.args) == 0 || i+1 >= len(e.format) {
		return "", false
	}
	switch v := e.args[0].(type) {
	case Name:
		if pre := e.format[:i]; pre == "" || pre == "unknown " {
			return v, true
		}
	case error:
		if i == 0 && (e.format[1] == 'v' || e.format[1] == 'w') {
			return Lead(v)
		}
	}
	return "", false
}

// Sayer is an error that names settings, as Error does: Say is its message with them
// worded by w.
type Sayer interface {
	error
	Say(w Words) string
}

// Error is err as w presents it: its message with each setting it names worded, the
// settings of the errors it wraps among them. It unwraps to err, so that its exit
// status and what it wraps stay; nil stays nil, and an error that names no setting is
// returned as it is. An error already presented keeps its words.
func (w Words) Error(err error) error {
	if err == nil {
		return nil
	}
	if said := w.say(err); said != err.Error() {
		return &worded{said, err}
	}
	return err
}

// say is err's message as w words it. A wrapper's message holds what it wraps as
// text: each wrapped error's unworded message in it is replaced by its worded one.
func (w Words) say(err error) string {
	switch e := err.(type) {
	case *worded:
		return e.msg
	case Sayer:
		return e.Say(w)
	}
	msg := err.Error()
	for _, c := range unwrap(err) {
		if c == nil {
			continue
		}
		if plain, said := c.Error(), w.say(c); plain != "" && said != plain {
			msg = strings.ReplaceAll(msg, plain, said)
		}
	}
	return msg
}

func unwrap(err error) []error {
	switch e := err.(type) {
	case interface{ Unwrap() error }:
		return []error{e.Unwrap()}
	case interface{ Unwrap() []error }:
		return e.Unwrap()
	}
	return nil
}

// Lead is the setting err's message opens with ("--timeout -5s: must not be
// negative"), if it opens with one that it names by value.
func Lead(err error) (Name, bool) {
	for err != nil {
		switch e := err.(type) {
		case *worded:
			err = e.err
			continue
		case interface{ lead() (Name, bool) }:
			return e.lead()
		}
		// A wrapper whose message opens with that of what it wraps.
		msg, next := err.Error(), error(nil)
		for _, c := range unwrap(err) {
			if c != nil && c.Error() != "" && strings.HasPrefix(msg, c.Error()) {
				next = c
				break
			}
		}
		err = next
	}
	return "", false
}

// worded is an error as a presenter worded it.
type worded struct {
	msg string
	err error
}

func (e *worded) Error() string { return e.msg }
func (e *worded) Unwrap() error { return e.err }
