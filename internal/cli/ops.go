package cli

import (
	"slices"
	"strings"
	"sync"

	"github.com/symmem/symmem"
)

// operations are the library's operations, in the order tables show them: the help,
// the checks and the completion of the commands read them.
var operations = sync.OnceValue(symmem.Operations)

// opsWhere lists the operations keep keeps, by name.
func opsWhere(keep func(symmem.Operation) bool) []string {
	var out []string
	for _, o := range operations() {
		if keep(o) {
			out = append(out, o.Name)
		}
	}
	return out
}

// allOps lists every operation; runOps those `symmem run` tests; pointOps those a
// sweep measures by default; collectiveOps those every rank takes part in.
func allOps() []string        { return opsWhere(func(symmem.Operation) bool { return true }) }
func runOps() []string        { return opsWhere(func(o symmem.Operation) bool { return o.Runs }) }
func pointOps() []string      { return opsWhere(func(o symmem.Operation) bool { return o.Point }) }
func collectiveOps() []string { return opsWhere(func(o symmem.Operation) bool { return o.Collective }) }

// opsTaking lists the operations that read the setting key beside their size.
func opsTaking(key string) []string {
	return opsWhere(func(o symmem.Operation) bool { return slices.Contains(o.Settings, key) })
}

// opsForAlgo lists the operations an --algo value is for (none for a value of none).
func opsForAlgo(algo string) []string {
	return opsWhere(func(o symmem.Operation) bool { return slices.Contains(o.Algos, algo) })
}

// opTakes says whether op reads the setting key.
func opTakes(op, key string) bool { return slices.Contains(opsTaking(key), op) }

// routesMoE says whether op routes a MoE layer (reads --tokens and the layer's other
// settings: dispatch and combine).
func routesMoE(op string) bool { return opTakes(op, "tokens") }

// multiplies says whether op is a fused operation, a matrix product of --m x --k and
// --k x --n with a collective (reads --m and the shape's other settings).
func multiplies(op string) bool { return opTakes(op, "m") }

// anyTakes says whether any of list reads the setting key.
func anyTakes(list []string, key string) bool {
	return slices.ContainsFunc(list, func(op string) bool { return opTakes(op, key) })
}

// opNames spells ops for messages: "put, get, ...".
func opNames(list []string) string { return strings.Join(list, ", ") }
