// Package config decides every setting's value in one place, with this precedence:
// command-line flag > SYMMEM_* environment variable > config file > built-in default.
// The defaults are the flags' own; a value from the environment or the file is copied
// onto a flag only when the flag was not given, and goes through the flag's own parser,
// so a bad value gets the same error wherever it came from.
//
// Every source is checked whether or not it wins: a SYMMEM_* variable or a config file
// key that is not a setting, or a value that does not parse, is an error even when a
// flag overrides it (a broken file is broken), named with the nearest real setting.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
	"go.yaml.in/yaml/v3"

	"github.com/symmem/symmem/internal/input"
	"github.com/symmem/symmem/internal/lazyre"
)

// Version is the config file format this binary reads.
const Version = 1

// MaxFileBytes bounds a config file: configs/default.yaml, every setting with its
// comment, is a few kilobytes.
const MaxFileBytes = 1 << 20

// EnvPrefix is the prefix of environment variables that set options.
const EnvPrefix = "SYMMEM"

// notSettings are flags that make no sense in a config file or the environment: one
// there would turn every command into another (dry-run, check: nothing run or built).
var notSettings = map[string]bool{"help": true, "config": true, "version": true, "dry-run": true, "check": true, "all": true}

// flagsOnly are the notSettings an earlier configs/default.yaml listed (as false): a
// copy of that file, or the variable, still reads where it says false, and says what to
// do where it says anything else.
var flagsOnly = map[string]string{"dry-run": "bench --dry-run", "check": "kernels build --check"}

// flagOnly says whether key is one of flagsOnly set to val: ignored (false), or an
// error naming the flag.
func flagOnly(key, val, where string) (bool, error) {
	flag, ok := flagsOnly[key]
	if !ok {
		return false, nil
	}
	if b, err := strconv.ParseBool(strings.TrimSpace(val)); err == nil && !b {
		return true, nil
	}
	return true, fmt.Errorf("%s: %q is the command-line flag of %s only, not a setting: remove it and give the flag where you mean it", where, key, flag)
}

// cobraOwn are the commands cobra adds, whose flags are no settings.
var cobraOwn = map[string]bool{"completion": true, "help": true, "__complete": true, "__completeNoDesc": true}

// EnvName is the environment variable for a setting: heap-size -> SYMMEM_HEAP_SIZE.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// Keys lists every setting any command of root accepts.
func Keys(root *cobra.Command) map[string]bool {
	keys := map[string]bool{}
	for k := range settingFlags(root) {
		keys[k] = true
	}
	return keys
}

// settingFlags maps every setting to its flags across root's commands (one name may be
// a flag of several commands, not always of one type: run's --impl is one name, bench's
// a list).
func settingFlags(root *cobra.Command) map[string][]*pflag.Flag {
	flags := map[string][]*pflag.Flag{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if cobraOwn[c.Name()] {
			return
		}
		add := func(f *pflag.Flag) {
			if !notSettings[f.Name] {
				flags[f.Name] = append(flags[f.Name], f)
			}
		}
		c.LocalFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return flags
}

// Sources are where settings come from besides the command line.
type Sources struct {
	// File is the config file ("" = none).
	File string
	// Env is the environment, as os.Environ returns it.
	Env []string
	// Other lists SYMMEM_* variables that are not settings but are read elsewhere (the
	// launcher's, test switches, SYMMEM_CONFIG): they are neither applied nor refused.
	Other []string
	// Checks are further checks of a setting's text beyond its type's parser (that an
	// address is HOST:PORT), made on every source's value: the error says what to type.
	Checks map[string]func(string) error
}

// Apply checks every source and fills the unset flags of cmd from the environment,
// then from the file. The first problem found is returned, as one line.
func Apply(cmd *cobra.Command, src Sources) error {
	flags := settingFlags(cmd.Root())
	fileVals, err := readFile(src.File, flags, src.Checks)
	if err != nil {
		return err
	}
	envVals, err := readEnv(src, flags)
	if err != nil {
		return err
	}
	var first error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if check := src.Checks[f.Name]; first == nil && f.Changed && check != nil {
			if err := check(f.Value.String()); err != nil {
				first = fmt.Errorf("--%s %s: %v", f.Name, input.Quote(f.Value.String()), err)
			}
		}
		if first != nil || notSettings[f.Name] || f.Changed {
			return
		}
		val, from := "", ""
		if s, ok := envVals[f.Name]; ok {
			val, from = s, "environment variable "+EnvName(f.Name)
		} else if s, ok := fileVals[f.Name]; ok {
			val, from = s, "config file "+src.File+": "+f.Name
		} else {
			return
		}
		if err := setFlag(cmd, f, val); err != nil {
			first = fmt.Errorf("%s %s: %s", from, input.Quote(val), Want(f, err))
			return
		}
		if f.Annotations == nil {
			f.Annotations = map[string][]string{}
		}
		f.Annotations[sourceKey] = []string{from}
	})
	return first
}

// sourceKey marks, in a flag's annotations, a flag that Apply set from the environment
// or the file.
const sourceKey = "symmem_source"

// OnCommandLine says whether the user gave f on the command line, not through a
// SYMMEM_* variable or the config file (pflag's Changed is true for all three once
// Apply has run). A setting a file shares between commands may mean nothing to this
// one; on the command line it was meant for this run.
func OnCommandLine(f *pflag.Flag) bool {
	return f != nil && f.Changed && f.Annotations[sourceKey] == nil
}

// SetBy names where Apply took f's value from ("environment variable SYMMEM_TIMEOUT",
// "config file F: timeout"), or "" for a flag typed on the command line or left alone.
func SetBy(f *pflag.Flag) string {
	if f == nil || !f.Changed || len(f.Annotations[sourceKey]) == 0 {
		return ""
	}
	return f.Annotations[sourceKey][0]
}

// Typed returns those of the named flags of fs that were typed on the command line.
func Typed(fs *pflag.FlagSet, names ...string) []string {
	var typed []string
	for _, name := range names {
		if OnCommandLine(fs.Lookup(name)) {
			typed = append(typed, name)
		}
	}
	return typed
}

// readEnv returns the values of the SYMMEM_* settings in the environment, each checked
// against the flags it sets; a SYMMEM_* variable that is no setting is an error.
func readEnv(src Sources, flags map[string][]*pflag.Flag) (map[string]string, error) {
	other := map[string]bool{}
	for _, name := range src.Other {
		other[name] = true
	}
	var names []string
	vals := map[string]string{}
	for _, kv := range src.Env {
		name, val, _ := strings.Cut(kv, "=")
		// An empty value counts as unset: `SYMMEM_NPROC= symmem ...` is how scripts
		// clear a setting.
		if !strings.HasPrefix(name, EnvPrefix+"_") || val == "" {
			continue
		}
		if _, setting := flags[envKey(name)]; other[name] && !(setting && EnvName(envKey(name)) == name) {
			continue
		}
		names = append(names, name)
		vals[name] = val
	}
	sort.Strings(names)
	out := map[string]string{}
	for _, name := range names {
		key := envKey(name)
		if EnvName(key) == name {
			if only, err := flagOnly(key, vals[name], "environment variable "+name); only {
				if err != nil {
					return nil, err
				}
				continue
			}
		}
		fs, ok := flags[key]
		if !ok || EnvName(key) != name {
			// Compared without the prefix that every candidate shares.
			var candidates []string
			for _, o := range src.Other {
				candidates = append(candidates, strings.TrimPrefix(o, EnvPrefix+"_"))
			}
			for k := range flags {
				candidates = append(candidates, strings.TrimPrefix(EnvName(k), EnvPrefix+"_"))
			}
			if n := Nearest(strings.TrimPrefix(name, EnvPrefix+"_"), candidates); n != "" {
				return nil, fmt.Errorf("environment variable %s is not a setting; did you mean %s_%s?", name, EnvPrefix, n)
			}
			return nil, fmt.Errorf("environment variable %s is not a setting (a setting's variable is %s_ and its flag's name: %s, %s, ...); unset it",
				name, EnvPrefix, EnvName("nproc"), EnvName("heap-size"))
		}
		if err := check(fs, src.Checks[key], vals[name]); err != nil {
			return nil, fmt.Errorf("environment variable %s %s: %v", name, input.Quote(vals[name]), err)
		}
		out[key] = vals[name]
	}
	return out, nil
}

// envKey is the setting an environment variable would set: SYMMEM_HEAP_SIZE -> heap-size.
func envKey(name string) string {
	return strings.ToLower(strings.ReplaceAll(strings.TrimPrefix(name, EnvPrefix+"_"), "_", "-"))
}

// readFile reads file ("" = none) and returns its settings as the text a flag parses,
// each checked against the flags it sets.
func readFile(file string, flags map[string][]*pflag.Flag, checks map[string]func(string) error) (map[string]string, error) {
	out := map[string]string{}
	if file == "" {
		return out, nil
	}
	b, err := input.Read(file, MaxFileBytes)
	var pe *fs.PathError
	switch {
	case errors.Is(err, input.ErrStopped):
		return nil, fmt.Errorf("config file %w", err) // the user stopped it: nothing to fix
	case errors.As(err, &pe):
		return nil, fmt.Errorf("config file %s: %v; give an existing YAML file (configs/default.yaml lists every setting)", file, pe.Err)
	case err != nil: // a directory, a device, too large
		return nil, fmt.Errorf("config file %v; give a YAML file (configs/default.yaml lists every setting)", err)
	}
	v := viper.New()
	v.SetConfigFile(file)
	ext := strings.ToLower(filepath.Ext(file))
	if ext != ".yaml" && ext != ".yml" && ext != ".json" && ext != ".toml" {
		v.SetConfigType("yaml")
	}
	if err := flat(b, ext == ".toml"); err != nil {
		return nil, fmt.Errorf("config file %s: %v", file, err)
	}
	if err := v.ReadConfig(bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("config file %s is not valid YAML: %s", file, yamlError(err))
	}
	var keys []string
	for _, k := range v.AllKeys() {
		if only, err := flagOnly(k, fmt.Sprint(v.Get(k)), "config file "+file); only {
			if err != nil {
				return nil, err
			}
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var names []string
	for k := range flags {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range keys {
		if k == "version" {
			continue
		}
		if _, ok := flags[k]; !ok {
			return nil, fmt.Errorf("config file %s: %s is not a setting; %s", file, input.Quote(k),
				suggest(k, names, "known settings: "+strings.Join(names, ", ")))
		}
	}
	if ver := v.Get("version"); ver != nil && fmt.Sprint(ver) != strconv.Itoa(Version) {
		return nil, fmt.Errorf("config file %s: version %v is not supported; this symmem reads version %d", file, ver, Version)
	}
	typed := typedValues(b)
	for _, k := range keys {
		if k == "version" {
			continue
		}
		val, ok := typed[k]
		if !ok {
			val = flagString(v.Get(k))
		}
		if err := check(flags[k], checks[k], val); err != nil {
			return nil, fmt.Errorf("config file %s: %s %s: %v", file, k, input.Quote(val), err)
		}
		out[k] = val
	}
	return out, nil
}

// yamlError words viper's parse error as the line that is wrong and what is wrong with
// it: "While parsing config: yaml: line 1: ..." -> "line 1: ...".
func yamlError(err error) string {
	msg := strings.TrimPrefix(err.Error(), "While parsing config: ")
	msg = strings.TrimPrefix(msg, "yaml: ")
	// "unmarshal errors:\n  line 2: ...": what is wrong is on the next line.
	if rest, ok := strings.CutPrefix(msg, "unmarshal errors:\n"); ok {
		msg = strings.TrimSpace(rest)
	}
	msg = firstLine(msg)
	if m := notMapping().FindStringSubmatch(msg); m != nil {
		what := "a single value"
		if m[2] == "seq" {
			what = "a list"
		}
		msg = m[1] + ": it holds " + what + "; want settings, one per line (nproc: 4)"
	}
	return msg
}

// check parses val with a fresh value of each flag's type, leaving the flags alone (a
// value is checked even where a flag overrides it), then with more, if any.
func check(fs []*pflag.Flag, more func(string) error, val string) error {
	if err := parses(fs, val); err != nil || more == nil {
		return err
	}
	return more(val)
}

func parses(fs []*pflag.Flag, val string) error {
	for _, f := range fs {
		if _, ok := f.Value.(pflag.SliceValue); ok {
			continue // lists of names: any text is a list; the command checks the names
		}
		t := reflect.TypeOf(f.Value)
		if t.Kind() != reflect.Pointer || t.Elem().Kind() == reflect.Struct {
			continue // not a simple value type: it is checked when it is applied
		}
		fresh, ok := reflect.New(t.Elem()).Interface().(pflag.Value)
		if !ok {
			continue
		}
		if err := fresh.Set(val); err != nil {
			return errors.New(Want(f, err))
		}
	}
	return nil
}

// Want says what a flag of f's type takes, for an error err from its parser: pflag's
// own parsers report strconv's and time's errors, which mean nothing to a user.
// symmem's own value types (sizes, counts) already say it.
func Want(f *pflag.Flag, err error) string {
	switch f.Value.Type() {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		if errors.Is(err, strconv.ErrRange) {
			return "out of range for a whole number"
		}
		return "want a whole number, such as 4"
	case "float32", "float64":
		if errors.Is(err, strconv.ErrRange) {
			return "out of range for a number"
		}
		return "want a number, such as 5 or 1.5"
	case "bool":
		return "want true or false"
	case "duration":
		return "want a duration with its unit, such as 500ms, 30s or 2m"
	}
	return err.Error()
}

func setFlag(cmd *cobra.Command, f *pflag.Flag, val string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		// An empty list is no list (as --impl "" is); an empty name in one is a stray
		// comma, refused as the command line refuses it (dropped, `impl: ","` ran the
		// defaults).
		var items []string
		if list := strings.TrimSpace(strings.Trim(val, "[]")); list != "" {
			for _, s := range strings.Split(list, ",") {
				if s = strings.TrimSpace(s); s == "" {
					return errors.New("an empty name (a stray comma?): give names separated by commas")
				}
				items = append(items, s)
			}
		}
		return sv.Replace(items)
	}
	return cmd.Flags().Set(f.Name, val)
}

// flagString turns a YAML value into the text a flag parses.
func flagString(x any) string {
	switch t := x.(type) {
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = fmt.Sprint(e)
		}
		return strings.Join(parts, ",")
	case nil:
		return ""
	}
	return fmt.Sprint(x)
}

// typedValues reads a YAML config's settings as the text the user typed (lower-cased
// keys): what YAML makes of a value is not always it (nproc: 99999999999999999999999
// becomes the float 1e+23). Where b is no YAML mapping (a TOML file), it says nothing,
// and the values viper parsed are used.
func typedValues(b []byte) map[string]string {
	var doc yaml.Node
	if yaml.Unmarshal(b, &doc) != nil || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil
	}
	out := map[string]string{}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		switch val := m[i+1]; val.Kind {
		case yaml.ScalarNode:
			out[strings.ToLower(m[i].Value)] = val.Value
		case yaml.SequenceNode:
			var parts []string
			for _, e := range val.Content {
				parts = append(parts, e.Value)
			}
			out[strings.ToLower(m[i].Value)] = strings.Join(parts, ",")
		}
	}
	return out
}

// notMapping matches yaml's words for a document that is not a mapping of settings.
var notMapping = lazyre.MustCompile(`^(line [0-9]+): cannot unmarshal !!(\w+)`)

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
