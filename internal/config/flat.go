package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	toml "github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"

	"github.com/symmem/symmem/internal/input"
)

// flat refuses a config file that is not one flat document of settings before viper
// reads it: viper flattens nested keys at a cost that grows as the cube of the depth
// (a 10 KB file nested 2,000 deep took 12 s, deaf to Ctrl-C), and reads only the first
// of several YAML documents, so that settings after a `---` were silently dropped.
// A file that does not parse is left to viper, whose message says where.
func flat(b []byte, isTOML bool) error {
	if line := tooDeep(b); line > 0 {
		return fmt.Errorf("line %d: brackets nested more than %d deep; settings are not nested: give each on its own line (nproc: 4)", line, maxBrackets)
	}
	if isTOML {
		var m map[string]any
		if toml.Unmarshal(b, &m) != nil {
			return nil
		}
		for k, v := range m {
			if _, ok := v.(map[string]any); ok {
				return nested(k, 0)
			}
		}
		return nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil // viper says what is wrong (an empty file is no settings)
	}
	var next yaml.Node
	switch err := dec.Decode(&next); {
	case err == nil:
		return fmt.Errorf("line %d: a second YAML document (after ---); put every setting in one document", max(next.Line, 1))
	case !errors.Is(err, io.EOF):
		return nil
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil // a list or a single value: viper's message says so
	}
	m := doc.Content[0].Content
	for i := 0; i+1 < len(m); i += 2 {
		switch val := deref(m[i+1]); val.Kind {
		case yaml.MappingNode:
			return nested(m[i].Value, val.Line)
		case yaml.SequenceNode:
			for _, e := range val.Content {
				if deref(e).Kind != yaml.ScalarNode {
					return fmt.Errorf("line %d: %s holds a list of lists or settings; a list setting holds names (impl: [memcpy, triton])", e.Line, input.Quote(m[i].Value))
				}
			}
		}
	}
	return nil
}

func nested(key string, line int) error {
	at := ""
	if line > 0 {
		at = fmt.Sprintf("line %d: ", line)
	}
	return fmt.Errorf("%s%s holds settings of its own; settings are not nested: give each on its own line (nproc: 4)", at, input.Quote(key))
}

// deref is the node an alias (*name) stands for.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

// maxBrackets is the deepest nesting of [ and { a config file may hold: a setting's
// value is at most a list of names. Deeper is refused before any parser reads it: TOML's
// took 5 s and 900 MB for 400,000 levels of brackets.
const maxBrackets = 16

// tooDeep returns the line where brackets outside quotes nest past maxBrackets, or 0.
func tooDeep(b []byte) int {
	depth, line := 0, 1
	var quote byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case c == '\n':
			line++
		case quote != 0:
			if c == '\\' && quote == '"' {
				i++
			} else if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case c == '[' || c == '{':
			if depth++; depth > maxBrackets {
				return line
			}
		case c == ']' || c == '}':
			depth = max(depth-1, 0)
		}
	}
	return 0
}
