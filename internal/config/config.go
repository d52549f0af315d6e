// Package config decides every setting's value in one place, with this precedence:
// command-line flag > SYMMEM_* environment variable > config file > built-in default.
// The defaults are the flags' own; a value from the environment or the file is copied
// onto a flag only when the flag was not given, and goes through the flag's own parser,
// so a bad value gets the same error wherever it came from.
package config

import (
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Version is the config file format this binary reads.
const Version = 1

// EnvPrefix is the prefix of environment variables that set options.
const EnvPrefix = "SYMMEM"

// notSettings are flags that make no sense in a config file or the environment.
var notSettings = map[string]bool{"help": true, "config": true, "version": true}

// EnvName is the environment variable for a setting: heap-size -> SYMMEM_HEAP_SIZE.
func EnvName(key string) string {
	return EnvPrefix + "_" + strings.ToUpper(strings.ReplaceAll(key, "-", "_"))
}

// Keys lists every setting any command of root accepts.
func Keys(root *cobra.Command) map[string]bool {
	keys := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		add := func(f *pflag.Flag) {
			if !notSettings[f.Name] {
				keys[f.Name] = true
			}
		}
		c.LocalFlags().VisitAll(add)
		c.PersistentFlags().VisitAll(add)
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return keys
}

// Apply fills the unset flags of cmd from the environment and from file ("" = none).
func Apply(cmd *cobra.Command, file string) error {
	v := viper.New()
	v.SetEnvPrefix(EnvPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	v.AutomaticEnv()
	known := Keys(cmd.Root())

	fileKeys := map[string]bool{}
	if file != "" {
		if _, err := os.Stat(file); err != nil {
			return fmt.Errorf("config file %s: %w", file, errors.Unwrap(err))
		}
		v.SetConfigFile(file)
		if v.ConfigFileUsed() != "" && !strings.HasSuffix(file, ".yaml") && !strings.HasSuffix(file, ".yml") &&
			!strings.HasSuffix(file, ".json") && !strings.HasSuffix(file, ".toml") {
			v.SetConfigType("yaml")
		}
		if err := v.ReadInConfig(); err != nil {
			return fmt.Errorf("config file %s is not valid: %v", file, firstLine(err.Error()))
		}
		var unknown []string
		for _, k := range v.AllKeys() {
			if k == "version" {
				continue
			}
			if !known[k] {
				unknown = append(unknown, k)
			}
			fileKeys[k] = true
		}
		if len(unknown) > 0 {
			sort.Strings(unknown)
			return fmt.Errorf("config file %s: unknown setting %q; known settings: %s",
				file, unknown[0], strings.Join(sortedKeys(known), ", "))
		}
		if ver := v.Get("version"); ver != nil && fmt.Sprint(ver) != fmt.Sprint(Version) {
			return fmt.Errorf("config file %s: version %v is not supported; this symmem reads version %d", file, ver, Version)
		}
	}

	var errs []error
	cmd.Flags().VisitAll(func(f *pflag.Flag) {
		if notSettings[f.Name] || f.Changed {
			return
		}
		var val, from string
		if s := os.Getenv(EnvName(f.Name)); s != "" {
			val, from = s, "environment "+EnvName(f.Name)
		} else if fileKeys[f.Name] {
			val, from = flagString(v.Get(f.Name)), "config file "+file+": setting "+f.Name
		} else {
			return
		}
		if err := setFlag(cmd, f, val); err != nil {
			errs = append(errs, fmt.Errorf("%s: invalid value %q: %v", from, val, err))
		}
	})
	return errors.Join(errs...)
}

func setFlag(cmd *cobra.Command, f *pflag.Flag, val string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		var items []string
		for _, s := range strings.Split(strings.Trim(val, "[]"), ",") {
			if s = strings.TrimSpace(s); s != "" {
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

func sortedKeys(m map[string]bool) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
