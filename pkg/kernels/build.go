package kernels

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
)

// sourcesHash is the hash kernels/build-kernels.py records as source_sha256: sha256
// over each source's base name, a NUL and its bytes, in name order.
func sourcesHash(files map[string][]byte) string {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	h := sha256.New()
	for _, n := range names {
		h.Write([]byte(n))
		h.Write([]byte{0})
		h.Write(files[n])
	}
	return hex.EncodeToString(h.Sum(nil))
}
